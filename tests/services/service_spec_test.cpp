// [[service]] as the loader reads it: every field, its errors located, and how variants,
// sweeps and vars reach it. No process is started here.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "experiment/plan.h"
#include "tests/support/load_helper.h"

using namespace wanlab;
using Catch::Matchers::Contains;

namespace {

/// A folder with one template, removed afterwards.
struct TemplateDir {
    std::filesystem::path dir;
    explicit TemplateDir(const std::string& text) {
        char t[] = "/tmp/wanlab-tpl-XXXXXX";
        dir = ::mkdtemp(t);
        std::ofstream(dir / "app.conf") << text;
    }
    ~TemplateDir() { std::filesystem::remove_all(dir); }
    std::string file() const { return (dir / "exp.toml").string(); }
};

}  // namespace

TEST_CASE("a service is read with its argv and host and ready check and vars and templates", "[services]") {
    TemplateDir t("listen {server}:{port};\nroot {dir};\nhttp { }\n");
    auto l = testing::load(R"(
[[service]]
name = "web"
host = "server"
command = ["app", "-c", "{dir}/app.conf", "--name", "{trial}"]
files = { "app.conf" = "app.conf" }
vars = { port = 8080, verbose = true }
ready = { port = 8080, timeout = "3s" }
stop_timeout = "2s"
[[probe]]
kind = "rtt"
[[variant]]
name = "a"
[[variant]]
name = "b"
[variant.service.web.vars]
port = 9090
)",
                           {}, t.file());
    INFO(l.messages);
    REQUIRE(l.exp);
    REQUIRE(l.exp->trials.size() == 2);
    const auto& s = l.exp->trials[0].services.at(0);
    CHECK(s.name == "web");
    CHECK(s.host == "server");
    CHECK(s.command == std::vector<std::string>{"app", "-c", "{dir}/app.conf", "--name", "{trial}"});
    CHECK(s.vars == std::map<std::string, std::string>{{"port", "8080"}, {"verbose", "true"}});
    CHECK(s.ready.kind == services::ReadyCheck::Kind::port);
    CHECK(s.ready.port == 8080);
    CHECK(s.ready.timeout == std::chrono::seconds(3));
    CHECK(s.stop_timeout == std::chrono::seconds(2));
    REQUIRE(s.files.size() == 1);
    CHECK(s.files[0].name == "app.conf");
    CHECK(s.files[0].source == (t.dir / "app.conf").string());
    CHECK(s.files[0].text == "listen {server}:{port};\nroot {dir};\nhttp { }\n");
    CHECK(l.exp->trials[1].services.at(0).vars.at("port") == "9090");  // the variant's
}

TEST_CASE("a service's mistakes are located: shell strings and placeholders and ready checks and names", "[services]") {
    TemplateDir t("listen {server}:{prot};\n");
    auto l = testing::load(R"(
[[service]]
name = "web"
command = "nginx -g 'daemon off;'"
[[service]]
name = "web2"
command = ["{dir}/app", "--at", "{sever}"]
files = { "../app.conf" = "app.conf", "b.conf" = "missing.conf", "c.conf" = "app.conf" }
vars = { port = 80, server = "x" }
ready = { port = 80, delay = "1s" }
hots = "server"
[[service]]
name = "web"
command = ["true"]
host = "moon"
[[probe]]
kind = "rtt"
)",
                           {}, t.file());
    REQUIRE_FALSE(l.exp);
    const auto& m = l.messages;
    INFO(m);
    CHECK_THAT(m, Contains("exp.toml:4:11: error: `command` must be an array of strings (argv, never a shell string)"));
    CHECK_THAT(m, Contains("exp.toml:7:12: error: the program of `command` takes no placeholder"));
    CHECK_THAT(m, Contains("exp.toml:7:33: error: `command` element 3: unknown placeholder {sever}; did you mean "
                           "{server}?"));
    CHECK_THAT(m, Contains("file name \"../app.conf\" must be a plain file name in {dir}"));
    CHECK_THAT(m, Contains("missing.conf: No such file or directory"));
    CHECK_THAT(m, Contains("app.conf:1:17: error: template of `c.conf`: unknown placeholder {prot}; did you mean "
                           "{port}?"));
    CHECK_THAT(m, Contains("var `server` would hide wanlab's own {server}"));
    CHECK_THAT(m, Contains("`ready` needs exactly one of `port`"));
    CHECK_THAT(m, Contains("unknown key `hots`") && Contains("did you mean `host`?"));
    CHECK_THAT(m, Contains("`host` = \"moon\" is not one of \"client\", \"router\", \"server\""));
    CHECK_THAT(m, Contains("two services are named `web`"));
}

TEST_CASE("a probe's server_port needs a service and a probe that can use a server it did not start", "[services]") {
    auto alone = testing::load("[[probe]]\nkind = \"throughput\"\ntool = \"iperf3\"\nserver_port = 5201\n");
    CHECK_FALSE(alone.exp);
    CHECK_THAT(alone.messages, Contains("has `server_port` = 5201 but the experiment has no [[service]]"));
    auto builtin = testing::load(
        "[[service]]\nname = \"s\"\ncommand = [\"iperf3\", \"-s\"]\n[[probe]]\nkind = \"throughput\"\nserver_port = "
        "5201\n");
    CHECK_FALSE(builtin.exp);
    CHECK_THAT(builtin.messages, Contains("probe `throughput` with `server_port`: the built-in throughput probe needs "
                                          "wanlab's own receiver"));
    auto url = testing::load("[[probe]]\nkind = \"http\"\nurl = \"http://{srever}:8080/\"\n");
    CHECK_FALSE(url.exp);
    CHECK_THAT(url.messages, Contains("unknown placeholder {srever}; did you mean {server}?"));
    auto ok = testing::load("[[probe]]\nkind = \"http\"\nurl = \"http://{server}:8080/index.html\"\n");
    INFO(ok.messages);
    CHECK(ok.exp);
}

TEST_CASE("a sweep reaches a service's vars and the plan shows each trial's command", "[services]") {
    auto l = testing::load(R"(
[[service]]
name = "srv"
command = ["iperf3", "-s", "-p", "{port}", "--affinity", "{cpu}"]
vars = { port = 5201, cpu = 0 }
ready = { delay = "200ms" }
[[probe]]
kind = "rtt"
[sweep]
"service.srv.vars.cpu" = [0, 1]
)");
    INFO(l.messages);
    REQUIRE(l.exp);
    REQUIRE(l.exp->trials.size() == 2);
    CHECK(l.exp->trials[1].services[0].vars.at("cpu") == "1");
    auto plan = experiment::render_plan_text(*l.exp);
    CHECK_THAT(plan, Contains("service srv on server: iperf3 -s -p 5201 --affinity 0; ready after 200ms"));
    CHECK_THAT(plan, Contains("start on server: iperf3 -s -p 5201 --affinity 1  (vars: cpu=1, port=5201)"));
}
