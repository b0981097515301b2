#include "cli/command.h"

#include <algorithm>
#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "core/diagnostic.h"
#include "core/error.h"
#include "core/text.h"
#include "core/version.h"
#include "probes/probe_spec.h"

namespace wanlab::cli {

namespace {
constexpr Command kCommands[] = {
    {"run", "Run an experiment end to end: apply, probe, restore, report before/after, gate CI", &setup_run},
    {"results", "Stored runs: list them, show one's report, merge them, a trial's sysctls as sysctl.d", &setup_results,
     "  wanlab results list\n"
     "  wanlab results show latest\n"
     "  wanlab results show latest --format html > report.html\n"
     "  wanlab results show latest --export csv > measurements.csv\n"
     "  wanlab results merge RUN_A RUN_B --out merged\n"
     "  wanlab results sysctl latest --variant large-buffers --point 40ms -o 90-wanlab.conf"},
    {"tune", "Search [tune.space] for the least settings that reach the best goal on the file's paths", &setup_tune,
     "  wanlab tune examples/tune-buffers.toml\n"
     "  wanlab tune examples/tune-buffers.toml --format json --write-sysctl 90-wanlab.conf\n"
     "  wanlab tune examples/tune-buffers.toml --resume t1a2b3c4d"},
    {"compare", "Compare two stored runs of the same experiment (another machine, kernel or version)", &setup_compare,
     "  wanlab compare RUN_A latest\n"
     "  wanlab compare latest latest --other ../results-from-the-other-machine"},
    {"validate", "Check an experiment file without touching the machine", &setup_validate,
     "  wanlab validate examples/buffer-sweep.toml\n"
     "  wanlab validate my-experiment.toml --set link.rtt=80ms"},
    {"plan", "Show the trials an experiment expands to, with equivalent tc/sysctl commands", &setup_plan,
     "  wanlab plan examples/buffer-sweep.toml\n"
     "  wanlab plan examples/buffer-sweep.toml --set run.repeats=1\n"
     "  wanlab plan examples/buffer-sweep.toml --json"},
    {"link", "Put link conditions on one device, show them, clear them (netlink, no tc)", &setup_link,
     "  wanlab link apply --netns lab --dev a0 --delay 20ms --jitter 2ms --loss 1% --rate 100mbit\n"
     "  wanlab link apply --dev eth1 --profile transatlantic --auto-restore 300\n"
     "  wanlab link show --netns lab --dev a0 --json\n"
     "  wanlab link clear --netns lab --dev a0"},
    {"doctor", "Check what this machine's kernel and tools support (changes nothing)", &setup_doctor,
     "  wanlab doctor\n"
     "  wanlab doctor examples/buffer-sweep.toml      (and whether this machine has what it needs)"},
    {"lab", "Build an experiment's namespace lab and keep it for debugging (lab up FILE / lab down RUN)", &setup_lab,
     "  wanlab lab up examples/buffer-sweep.toml --run dbg\n"
     "  ip netns exec wanlab-dbg-client ping 198.18.0.6\n"
     "  wanlab lab down dbg"},
    {"shell", "Run a shell or your own command in one trial's lab, on the emulated path (shell FILE -- CMD)",
     &setup_shell,
     "  wanlab shell examples/buffer-sweep.toml\n"
     "  wanlab shell examples/mobile-api.toml -- curl -o /dev/null http://$WANLAB_SERVER/"},
    {"restore", "Give the machine back after a killed run, from its journal in /run/wanlab", &setup_restore,
     "  wanlab restore\n"
     "  wanlab restore RUN --forget     (after checking the machine by hand)"},
    {"probe",
     "Measure once across a bare two-namespace lab: throughput, udp, rtt, rr, http, transfer (built in or "
     "iperf3/ping/wrk/hping3/curl)",
     &setup_probe},
    {"profiles", "List the named link and tuning profiles (yours first), or show one in full", &setup_profiles,
     "  wanlab profiles\n"
     "  wanlab profiles lte"},
    {"vm", "Run commands in a throwaway micro-VM with a stock kernel (real netem anywhere)", &setup_vm,
     "  wanlab vm fetch\n"
     "  wanlab vm info\n"
     "  wanlab vm run -- sh -c 'tc qdisc add dev lo root netem delay 5ms && tc qdisc show dev lo'"},
    {"agent", "One machine's part of a run across machines, driven over ssh by the wanlab that runs it", &setup_agent},
    {"help", "Show the command list, or one command's options and examples (help COMMAND [SUBCOMMAND])", &setup_help,
     "  wanlab help run\n"
     "  wanlab help results show\n"
     "  wanlab help probe http      (the http kind's options only)"},
    {"completion", "Print the bash or zsh completion script (installed by cmake --install)", &setup_completion, "",
     true},
};
}  // namespace

std::span<const Command> commands() { return kCommands; }

namespace {
std::vector<std::string>& dashdash() {
    static std::vector<std::string> args;
    return args;
}
}  // namespace

std::unique_ptr<CLI::App> make_app(std::map<CLI::App*, Runner>& runners) {
    auto app = std::make_unique<CLI::App>(
        "wanlab: emulate WAN links, sweep kernel network settings, measure the difference.\n"
        "Experiments are TOML files; see docs/experiment-format.md.",
        "wanlab");
    app->set_version_flag("--version", std::string("wanlab ") + kVersion);
    app->footer(
        "Start here:\n"
        "  wanlab run examples/buffer-sweep.toml      (as root; in the micro-VM where the kernel lacks netem)\n"
        "  wanlab probe http --rtt 150ms --loss 1% --rate 20mbit\n"
        "The shipped experiments are in examples/ (docs/examples.md); `wanlab run NAME` finds one by name.\n"
        "`wanlab help COMMAND` shows a command's options and examples. Exit status: 0 ok, 1 failure,\n"
        "2 bad input or no root, 3 an [[assert]] failed, 130 interrupted.");
    app->require_subcommand(1);
    app->fallthrough(false);
    for (const auto& cmd : commands()) {
        CLI::App* sub = app->add_subcommand(cmd.name, cmd.summary);
        if (cmd.hidden) sub->group("");
        // Its own examples, never the list's (a sub-command inherits its parent's footer).
        sub->footer(*cmd.examples ? fmt::format("Examples:\n{}", cmd.examples) : std::string());
        runners[sub] = cmd.setup(*sub);
    }
    return app;
}

std::string help_for(const CLI::App& app, const std::vector<std::string>& words) {
    const CLI::App* at = &app;
    std::string said = "wanlab";
    for (std::size_t i = 0; i < words.size(); ++i) {
        const auto& w = words[i];
        if (said == "wanlab probe") {
            if (auto h = probe_kind_help(w); !h.empty()) return h;
        }
        const CLI::App* next = nullptr;
        std::vector<std::string> names;
        for (const auto* sub : at->get_subcommands([](const CLI::App*) { return true; })) {
            if (sub->get_group().empty()) continue;  // hidden
            names.push_back(sub->get_name());
            if (sub->get_name() == w) next = sub;
        }
        if (said == "wanlab probe")
            for (const auto& k : probes::probe_kinds()) names.emplace_back(k.name);
        if (!next) {
            auto guess = did_you_mean(w, names);
            throw InputError(fmt::format("{} has no {} `{}`{}; {}: {}", said, said == "wanlab" ? "command" : "part",
                                         text::terminal_safe(w),
                                         guess.empty() ? "" : fmt::format(" (did you mean `{}`?)", guess),
                                         said == "wanlab probe" ? "its kinds" : "there are", fmt::join(names, ", ")));
        }
        at = next;
        said += " " + w;
    }
    // As `wanlab results show --help` prints it: the usage line names the whole path.
    auto space = said.rfind(' ');
    return at->help(space == std::string::npos ? "" : said.substr(0, space));
}

Runner setup_help(CLI::App& sub) {
    auto words = std::make_shared<std::vector<std::string>>();
    sub.add_option("command", *words, "A command, and a sub-command or probe kind of it");
    return [words] {
        // A fresh command line: the one that parsed `help` would show help's own help.
        std::map<CLI::App*, Runner> runners;
        auto app = make_app(runners);
        std::fputs(help_for(*app, *words).c_str(), stdout);
        return 0;
    };
}

CLI::Option* add_key_option(CLI::App& app, const std::string& key, const std::string& help,
                            std::function<void(const std::string&)> set) {
    std::string dashed = key;
    std::replace(dashed.begin(), dashed.end(), '_', '-');
    CLI::Option* option = app.add_option_function<std::string>("--" + dashed, set, help);
    if (dashed != key) app.add_option_function<std::string>("--" + key, set, "Alias of --" + dashed)->group("");
    return option;
}

namespace {
std::vector<std::string>& whole_line() {
    static std::vector<std::string> args;
    return args;
}
}  // namespace

const std::vector<std::string>& command_line() { return whole_line(); }
void set_command_line(std::vector<std::string> args) { whole_line() = std::move(args); }

const std::vector<std::string>& command_after_dashdash() { return dashdash(); }
void set_command_after_dashdash(std::vector<std::string> args) { dashdash() = std::move(args); }

}  // namespace wanlab::cli
