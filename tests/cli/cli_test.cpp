// The `wanlab` command line as the binary builds it: how options are spelled, what parses,
// and that the generated completions offer every command and option.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/cmd_probe.h"
#include "cli/command.h"
#include "core/error.h"
#include "results/store.h"
#include "tests/report/fixtures.h"

using namespace wanlab;

namespace {

struct Named {
    std::string path;
    const CLI::App* app;
};

/// Every sub-command, nested ones too, hidden ones too, with its path ("wanlab link apply").
std::vector<Named> every_command(const CLI::App& app, const std::string& path = "wanlab") {
    std::vector<Named> out{{path, &app}};
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
        for (const auto& n : every_command(*sub, path + " " + sub->get_name())) out.push_back(n);
    return out;
}

bool visible(const CLI::Option* o) { return !o->get_group().empty(); }

/// The text between `start` and the next `end` in `script` ("" when `start` is absent).
std::string between(const std::string& script, const std::string& start, const std::string& end) {
    auto from = script.find(start);
    if (from == std::string::npos) return "";
    from += start.size();
    return script.substr(from, script.find(end, from) - from);
}

struct Parsed {
    cli::ProbeArgs args;
    probes::ProbeSpec spec;
};

Parsed probe_line(const std::string& line) {
    Parsed p;
    CLI::App app;
    cli::add_probe_options(app, p.args);
    app.parse(line, false);
    p.args = cli::sorted_out(p.args);
    p.spec = cli::resolve(p.args);
    return p;
}

}  // namespace

TEST_CASE("every long option of every command is spelled with dashes, underscores only as hidden aliases", "[cli]") {
    std::map<CLI::App*, cli::Runner> runners;
    auto app = cli::make_app(runners);
    std::size_t options = 0;
    for (const auto& [path, cmd] : every_command(*app))
        for (const CLI::Option* o : cmd->get_options())
            for (const auto& name : o->get_lnames()) {
                INFO(path << " --" << name);
                ++options;
                if (visible(o)) {
                    CHECK(name.find('_') == std::string::npos);
                } else if (name.find('_') != std::string::npos) {
                    std::string dashed = name;
                    std::replace(dashed.begin(), dashed.end(), '_', '-');
                    const CLI::Option* alias_of = cmd->get_option_no_throw("--" + dashed);
                    REQUIRE(alias_of != nullptr);
                    // `wanlab probe` lists each kind's options under `wanlab help probe KIND` instead.
                    CHECK((visible(alias_of) || path == "wanlab probe"));
                }
            }
    CHECK(options > 50);  // the walk saw the commands' options, not only --help
}

TEST_CASE("a key option parses with dashes and with its TOML underscore spelling", "[cli]") {
    auto dashed = probe_line("rr --server-split-write true --request-size 64KiB");
    auto underscored = probe_line("rr --server_split_write true --request_size 64KiB");
    CHECK(dashed.args.values ==
          std::map<std::string, std::string>{{"server_split_write", "true"}, {"request_size", "64KiB"}});
    CHECK(underscored.args.values == dashed.args.values);
    CHECK(std::get<bool>(underscored.spec.options.at("server_split_write")));

    std::map<CLI::App*, cli::Runner> runners;
    auto app = cli::make_app(runners);
    CHECK_NOTHROW(app->parse("link apply --dev eth0 --packet_overhead 14 --rate 10mbit", false));
    app = cli::make_app(runners);
    CHECK_NOTHROW(app->parse("link apply --dev eth0 --packet-overhead 14 --rate 10mbit", false));
    app = cli::make_app(runners);
    CHECK_THROWS_AS(app->parse("link apply --dev eth0 --packet_overheat 14", false), CLI::ExtrasError);
}

TEST_CASE("probe takes link conditions: the usual ones short, every [link] key as --link-KEY, a profile", "[cli]") {
    auto rtt = probe_line("rtt --rtt 150ms --loss 1% --rate 20mbit --profile lte --link-limit 500");
    CHECK(rtt.args.link ==
          std::map<std::string, std::string>{{"rtt", "150ms"}, {"loss", "1%"}, {"rate", "20mbit"}, {"limit", "500"}});
    CHECK(rtt.args.profile == "lte");
    CHECK(rtt.args.values.count("rate") == 0);  // rtt has no `rate`: the link's
    // udp sends at its own `rate`: the link's is --link-rate; transfer's `gap` likewise.
    auto udp = probe_line("udp --rate 5mbit --link-rate 20mbit");
    CHECK(udp.args.values.at("rate") == "5mbit");
    CHECK(udp.args.link == std::map<std::string, std::string>{{"rate", "20mbit"}});
    auto transfer = probe_line("transfer --gap 1s --link-gap 5");
    CHECK(transfer.args.values.at("gap") == "1s");
    CHECK(transfer.args.link == std::map<std::string, std::string>{{"gap", "5"}});
}

TEST_CASE("an http probe with --url alone measures that server from here, without --address", "[cli]") {
    auto p = probe_line("http --url http://192.0.2.10:8080/index.html --duration 2s");
    auto where = cli::given_endpoints(p.args, p.spec);
    REQUIRE(where);
    CHECK(where->server.remote);
    CHECK(where->client.netns.empty());  // the namespace wanlab runs in, which can reach the url
    CHECK(where->client.address.empty());

    auto bare = probe_line("http --duration 2s");
    CHECK_FALSE(cli::given_endpoints(bare.args, bare.spec));
    auto ns_only = probe_line("rtt --server-ns x");
    CHECK_THROWS_AS(cli::given_endpoints(ns_only.args, ns_only.spec), InputError);
}

TEST_CASE("the completion scripts offer every command and every option of each", "[cli]") {
    std::map<CLI::App*, cli::Runner> runners;
    auto app = cli::make_app(runners);
    const std::string bash = cli::bash_completion(*app), zsh = cli::zsh_completion(*app);
    for (const auto& [path, cmd] : every_command(*app)) {
        if (cmd->get_group().empty()) continue;  // `completion` itself
        INFO(path);
        // What each script offers after the command's path.
        const std::string words = " " + between(bash, "\n        '" + path + "') words=\"", "\" ;;") + " ";
        const std::string items = between(zsh, "\n    ('" + path + "') items=(", " ) ;;");
        CHECK(words.size() > 2);
        for (const CLI::App* sub : cmd->get_subcommands([](const CLI::App* s) { return !s->get_group().empty(); })) {
            CHECK(words.find(" " + sub->get_name() + " ") != std::string::npos);
            CHECK(items.find(" '" + sub->get_name() + ":") != std::string::npos);
        }
        for (const CLI::Option* o : cmd->get_options(visible))
            for (const auto& name : o->get_lnames()) {
                INFO("--" << name);
                CHECK(words.find(" --" + name + " ") != std::string::npos);
                CHECK(items.find(" '--" + name + ":") != std::string::npos);
            }
    }
    CHECK(bash.find("--server_split_write") == std::string::npos);
    // Values wanlab knows: a kind, a format, runs, profiles and examples (asked for when tab is pressed).
    CHECK_THAT(bash, Catch::Contains("'wanlab probe') words=\"") && Catch::Contains(" --server-split-write ") &&
                         Catch::Contains(" throughput udp rtt rr http transfer command\" ;;"));
    CHECK_THAT(bash, Catch::Contains("'wanlab results show --format') COMPREPLY=($(compgen -W \"table csv json "
                                     "markdown html\" -- \"$cur\")); return 0 ;;"));
    CHECK_THAT(bash, Catch::Contains("'wanlab run --resume') COMPREPLY=($(compgen -W \"$(wanlab completion words runs "
                                     "2>/dev/null)\""));
    CHECK_THAT(bash, Catch::Contains("'wanlab link apply --profile') COMPREPLY=($(compgen -W \"$(wanlab completion "
                                     "words profiles"));
    CHECK_THAT(bash, Catch::Contains("'wanlab run') words=\"") &&
                         Catch::Contains("$(wanlab completion words examples 2>/dev/null)\" ;;"));
    CHECK_THAT(zsh,
               Catch::Contains("('wanlab results show --format') compadd -- table csv json markdown html; return"));
    CHECK(bash.find("complete -o default -F _wanlab wanlab") != std::string::npos);
    CHECK(zsh.rfind("#compdef wanlab\n", 0) == 0);
}

TEST_CASE("completion lists stored runs newest first after latest, and the profiles and examples by name", "[cli]") {
    char tmpl[] = "/tmp/wanlab-complete-XXXXXX";
    std::filesystem::path dir = ::mkdtemp(tmpl);
    CHECK(cli::completion_words("runs", dir).empty());  // no database: nothing, no error
    {
        results::Store store(dir / "results.db");
        for (const char* id : {"20261201T000000-aaaa", "20261202T000000-bbbb"}) {
            results::Run run;
            run.id = id;
            run.started = std::string("2026-12-0") + id[7] + "T00:00:00Z";
            store.begin_run(run);
        }
    }
    CHECK(cli::completion_words("runs", dir) ==
          std::vector<std::string>{"latest", "20261202T000000-bbbb", "20261201T000000-aaaa"});
    std::filesystem::remove_all(dir);
    auto profiles = cli::completion_words("profiles", dir);
    CHECK(std::find(profiles.begin(), profiles.end(), "lte") != profiles.end());
    auto examples = cli::completion_words("examples", dir);
    CHECK(std::find(examples.begin(), examples.end(), "buffer-sweep") != examples.end());
    CHECK_THROWS_AS(cli::completion_words("passwords", dir), InputError);
}

TEST_CASE("help names a command, a part of it or a probe kind, and says what it does not know", "[cli]") {
    std::map<CLI::App*, cli::Runner> runners;
    auto app = cli::make_app(runners);
    CHECK_THAT(cli::help_for(*app, {}), Catch::Contains("Subcommands:") && Catch::Contains("wanlab help COMMAND"));
    auto show = cli::help_for(*app, {"results", "show"});
    CHECK_THAT(show, Catch::Contains("Usage: wanlab results show") && Catch::Contains("wanlab results show latest"));
    CHECK_THAT(show, !Catch::Contains("wanlab plan examples/buffer-sweep.toml --json"));  // not the list's examples
    auto http = cli::help_for(*app, {"probe", "http"});
    CHECK_THAT(http, Catch::Contains("Options of http:") && Catch::Contains("--connections") &&
                         Catch::Contains("Metrics of http"));
    CHECK_THAT(http, !Catch::Contains("--streams") && !Catch::Contains("--group") && !Catch::Contains("@run.duration"));
    CHECK_THAT(http, Catch::Contains("default 10s"));
    CHECK_THROWS_WITH(cli::help_for(*app, {"resutls"}),
                      Catch::Contains("no command `resutls` (did you mean `results`?)"));
    CHECK_THROWS_WITH(cli::help_for(*app, {"probe", "htp"}), Catch::Contains("(did you mean `http`?); its kinds:"));
    // Every command's --help ends with its own examples, never the command list's.
    for (const auto& cmd : cli::commands()) {
        if (cmd.hidden) continue;
        INFO(cmd.name);
        auto h = cli::help_for(*app, {cmd.name});
        CHECK_THAT(h, !Catch::Contains("Start here:"));
        if (std::string(cmd.name) != "agent") CHECK_THAT(h, Catch::Contains("Example"));
    }
}

TEST_CASE("what a foreign results database says reaches the terminal escaped", "[cli][security]") {
    char tmpl[] = "/tmp/wanlab-foreign-db-XXXXXX";
    std::filesystem::path dir = ::mkdtemp(tmpl);
    {
        results::Store store(dir / "results.db");
        results::Run run;
        run.id = "r1";
        run.experiment = "x\x1b]0;pwned\x07\x1b[2J";
        run.started = "2026-12-01T00:00:00Z";
        store.begin_run(run);
    }
    FILE* p = ::popen(fmt::format("{} results list --out {} 2>&1", WANLAB_BINARY, dir.string()).c_str(), "r");
    REQUIRE(p);
    std::string out;
    char buf[512];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    CHECK(::pclose(p) == 0);
    CHECK(out.find('\x1b') == std::string::npos);
    CHECK(out.find("x\\x1b]0;pwned\\x07\\x1b[2J") != std::string::npos);
    std::filesystem::remove_all(dir);
}

namespace {

/// `command` through the shell: its exit status and what it wrote (stderr with stdout).
std::pair<int, std::string> shell(const std::string& command) {
    FILE* p = ::popen((command + " 2>&1").c_str(), "r");
    if (!p) return {-1, ""};
    std::string out;
    char buf[512];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    int status = ::pclose(p);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

}  // namespace

TEST_CASE("results sysctl writes a trial's drop-in, never through a symbolic link or over a file", "[cli][security]") {
    char tmpl[] = "/tmp/wanlab-sysctl-XXXXXX";
    std::filesystem::path dir = ::mkdtemp(tmpl);
    {
        auto d = report::fixtures::buffer_sweep();
        results::Store store(dir / "results.db");
        store.begin_run(d.run, d.trials);
        for (const auto& m : d.measurements) store.add_measurement(d.run.id, m);
    }
    auto cmd = fmt::format("{} results sysctl --out {} latest --variant large-buffers", WANLAB_BINARY, dir.string());
    auto [status, out] = shell(cmd + " --point 40ms");
    CHECK(status == 0);
    CHECK(out.find("wanlab: --point \"40ms\" matched sweep point \"link.rtt=40ms\"\n") != std::string::npos);
    CHECK(out.find("\nnet.ipv4.tcp_rmem = 4096 131072 67108864\n") != std::string::npos);

    CHECK(shell(cmd).first == 2);  // two sweep points, none picked
    CHECK(shell(cmd + " --point 40ms --variant nope").first == 2);

    auto target = dir / "planted";
    std::filesystem::create_symlink(dir / "victim", target);
    auto [link_status, link_out] = shell(cmd + " --point 40ms -o " + target.string());
    CHECK(link_status == 2);
    CHECK(link_out.find("symbolic link") != std::string::npos);
    CHECK(!std::filesystem::exists(dir / "victim"));

    auto file = dir / "90-wanlab.conf";
    CHECK(shell(cmd + " --point 40ms -o " + file.string()).first == 0);
    CHECK(std::filesystem::file_size(file) > 0);
    auto [again, again_out] = shell(cmd + " --point 20ms -o " + file.string());
    CHECK(again == 2);
    CHECK(again_out.find("give --force") != std::string::npos);
    CHECK(shell(cmd + " --point 20ms --force -o " + file.string()).first == 0);
    std::filesystem::remove_all(dir);
}
