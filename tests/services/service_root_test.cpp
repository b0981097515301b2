// [[service]] on the real machine (root), through the binary: the user's own program runs in
// the server namespace for each trial, after the trial's sysctls; a service that dies fails
// its trial with its own stderr and the run goes on; a wanlab killed with SIGKILL leaves its
// services to `wanlab restore`, which stops every process of them. Needs no netem.
#include <sys/wait.h>

#include <filesystem>
#include <string>

#include "tests/support/root_helper.h"

using namespace wanlab::root_testing;

namespace {

/// The folder `shell` and `lab up` leave for the user ("their output and files: DIR"), which a
/// test removes once it has read what it needs.
void remove_services_folder(const std::string& said) {
    const std::string marker = "their output and files: /tmp/wanlab-";
    auto at = said.find(marker);
    if (at == std::string::npos) return;
    auto start = at + marker.size() - std::string("/tmp/wanlab-").size();
    auto end = said.find_first_of(" \n", start);
    std::filesystem::remove_all(said.substr(start, end == std::string::npos ? std::string::npos : end - start));
}

/// An experiment file with `body` after a short [run], removed with its results.
struct ServiceExperiment {
    std::filesystem::path dir;
    std::filesystem::path path;
    explicit ServiceExperiment(const std::string& body) {
        char t[] = "/tmp/wanlab-svc-XXXXXX";
        dir = ::mkdtemp(t);
        path = dir / "svc.toml";
        std::ofstream(path) << "name = \"svc\"\n[run]\nrepeats = 2\nwarmup = \"0s\"\ncooldown = \"0s\"\n" << body;
    }
    ~ServiceExperiment() { std::filesystem::remove_all(dir); }
    std::string run(const std::string& id, int* status, const std::string& extra = "") const {
        return sh(fmt::format("{} run {} --run {} --out {} --quiet {} 2>&1", WANLAB_BINARY, path.string(), id,
                              (dir / "out").string(), extra),
                  status);
    }
    std::filesystem::path trial_dir(const std::string& run, int index, const std::string& id_prefix = "") const {
        for (const auto& e : std::filesystem::directory_iterator(dir / "out" / run))
            if (e.path().filename().string().starts_with(fmt::format("trial-{}-{}", index, id_prefix))) return e.path();
        return {};
    }
};

std::string slurp(const std::filesystem::path& p) {
    std::ifstream in(p);
    return {std::istreambuf_iterator<char>(in), {}};
}

}  // namespace

TEST_CASE("a service runs in the server namespace after the trial's sysctls and serves the probe", "[root]") {
    if (skip_unless_root()) return;
    // The service prints the tcp_rmem its namespace has when it starts, then serves iperf3.
    ServiceExperiment exp(R"(
[sysctl.server]
"net.ipv4.tcp_rmem" = [4096, 87381, 3145728]
[[service]]
name = "iperf3"
command = ["sh", "-c", "cat /proc/sys/net/ipv4/tcp_rmem; echo at {server} in {trial}; exec iperf3 -s -B {server} -p 5201"]
ready = { port = 5201 }
[[probe]]
name = "bulk"
kind = "throughput"
tool = "iperf3"
server_port = 5201
duration = "1s"
)");
    Cleanup cleanup("svc-ok");
    auto before = capture();
    int status = 0;
    auto out = exp.run("svc-ok", &status);
    INFO(out);
    CHECK(status == 0);
    auto dir = exp.trial_dir("svc-ok", 1);
    REQUIRE_FALSE(dir.empty());
    auto printed = slurp(dir / "iperf3.stdout");
    INFO(printed);
    // The trial's value, not the machine's: the service started after the sysctls were set.
    CHECK_THAT(printed, Catch::StartsWith("4096\t87381\t3145728\n"));
    CHECK_THAT(printed, Catch::Contains("at 198.18.0.6 in " + dir.filename().string().substr(8)));
    // The probe measured through the service (iperf3's own lines are in its stdout).
    auto rate = sh(fmt::format("sqlite3 {} \"SELECT value FROM metrics WHERE name = 'throughput'\"",
                               (exp.dir / "out" / "results.db").string()));
    INFO(rate);
    CHECK(std::count(rate.begin(), rate.end(), '\n') == 2);
    CHECK(std::stod(rate) > 1e6);
    CHECK(sh("pgrep -f '[i]perf3 -s -B 198.18.0.6 -p 5201'").empty());  // stopped with its trial
    CHECK(capture() == before);
}

TEST_CASE("a service that dies fails its trial with its stderr and the run goes on", "[root]") {
    if (skip_unless_root()) return;
    ServiceExperiment exp(R"(
[[service]]
name = "fragile"
command = ["sh", "-c", "echo 'fatal: {why}' >&2; sleep {life}; exit 3"]
vars = { why = "out of coffee", life = "0.5" }
ready = { delay = "100ms" }
[[probe]]
name = "ping"
kind = "rtt"
count = 20
interval = "100ms"
[[variant]]
name = "dies"
[[variant]]
name = "lives"
[variant.service.fragile.vars]
life = "60.25"  # a length no other test sleeps: pgrep below looks for it
)");
    Cleanup cleanup("svc-die");
    auto before = capture();
    int status = 0;
    auto out = exp.run("svc-die", &status);
    INFO(out);
    CHECK(status == 1);
    CHECK_THAT(out, Catch::Contains("1 of 2 trials failed"));
    CHECK_THAT(out, Catch::Contains("service `fragile` exited with status 3 while its trial ran") &&
                        Catch::Contains("fatal: out of coffee"));
    auto statuses = sh(fmt::format("sqlite3 {} 'SELECT variant, status FROM trials ORDER BY idx'",
                                   (exp.dir / "out" / "results.db").string()));
    CHECK(statuses == "dies|failed\nlives|done\n");
    CHECK(sh("pgrep -f '^sleep 60.25$'").empty());  // the living one was stopped with its trial
    CHECK(capture() == before);
}

TEST_CASE("a service that never gets ready fails its trial within its timeout", "[root]") {
    if (skip_unless_root()) return;
    ServiceExperiment exp(R"(
[[service]]
name = "deaf"
command = ["sleep", "30"]
ready = { port = 9, timeout = "500ms" }
[[probe]]
kind = "rtt"
count = 5
)");
    Cleanup cleanup("svc-deaf");
    auto before = capture();
    int status = 0;
    auto out = exp.run("svc-deaf", &status);
    INFO(out);
    CHECK(status == 1);
    CHECK_THAT(out, Catch::Contains("service `deaf` was not ready after 0.") &&
                        Catch::Contains("nothing accepted on 198.18.0.6:9") && Catch::Contains("(it printed nothing)"));
    CHECK(sh("pgrep -f '^sleep 30$'").empty());
    CHECK(capture() == before);
}

TEST_CASE("a service whose program is missing is refused before anything changes", "[root]") {
    if (skip_unless_root()) return;
    ServiceExperiment exp(R"(
[[service]]
name = "ghost"
command = ["wanlab-no-such-server", "--port", "80"]
[[probe]]
kind = "rtt"
)");
    auto before = capture();
    int status = 0;
    auto out = exp.run("svc-ghost", &status);
    INFO(out);
    CHECK(status == 2);
    CHECK_THAT(out, Catch::Contains("service `ghost`: `wanlab-no-such-server` is not installed") &&
                        Catch::Contains("nothing was changed"));
    CHECK(capture() == before);
}

TEST_CASE("wanlab restore stops every process of a service a SIGKILLed run left", "[root]") {
    if (skip_unless_root()) return;
    // nginx forks a worker, which outlives its master's SIGKILL: only the journal finds it.
    std::string examples = WANLAB_SOURCE_DIR "/examples/nginx";
    ServiceExperiment exp(fmt::format(R"(
[[service]]
name = "web"
command = ["nginx", "-c", "{{dir}}/nginx.conf", "-e", "stderr", "-g", "daemon off;"]
files = {{ "nginx.conf" = "{}/nginx.conf", "index.html" = "{}/index.html" }}
vars = {{ nodelay = "on" }}
ready = {{ port = 8080 }}
[[probe]]
kind = "http"
url = "http://{{server}}:8080/"
connections = 2
duration = "30s"
)",
                                      examples, examples));
    Cleanup cleanup("svc-kill");
    auto before = capture();
    std::string pattern = fmt::format("^nginx: master process .*{}", exp.dir.string());
    std::vector<pid_t> nginx;
    {
        Wanlab run({"run", exp.path.string(), "--run", "svc-kill", "--out", (exp.dir / "out").string()});
        REQUIRE(eventually([&] {
            return !sh("pgrep -f '^nginx: worker process'").empty() &&
                   !sh(fmt::format("pgrep -f '{}'", pattern)).empty();
        }));
        ::usleep(300'000);  // the probe is loading it
        run.signal(SIGKILL);
        run.wait();
    }
    // The master died with wanlab (it was its child); its worker did not.
    CHECK_FALSE(sh("pgrep -f '^nginx: worker process'").empty());
    auto restored = sh(fmt::format("{} restore 2>&1", WANLAB_BINARY));
    INFO(restored);
    CHECK_THAT(restored, Catch::Contains("stopped service web (process group"));
    CHECK(eventually([&] { return sh("pgrep -f '^nginx: worker process'").empty(); }, std::chrono::seconds(5)));
    CHECK(capture() == before);
}

TEST_CASE("wanlab shell runs the trial's services while the command works against them", "[root]") {
    if (skip_unless_root()) return;
    ServiceExperiment exp(R"(
[[service]]
name = "echo"
command = ["iperf3", "-s", "-B", "{server}", "-p", "5299"]
ready = { port = 5299 }
)");
    Cleanup cleanup("svc-shell");
    auto before = capture();
    int status = 0;
    auto out = sh(fmt::format("{} shell {} --run svc-shell -- sh -c 'iperf3 -c $WANLAB_SERVER -p 5299 -t 1 -J | "
                              "grep -c bits_per_second' 2>&1",
                              WANLAB_BINARY, exp.path.string()),
                  &status);
    INFO(out);
    CHECK(status == 0);  // grep found iperf3's numbers: the service answered
    CHECK_THAT(out, Catch::Contains("services running: echo on server"));
    remove_services_folder(out);
    CHECK(sh("pgrep -f '[i]perf3 -s -B 198.18.0.6 -p 5299'").empty());
    CHECK(capture() == before);
}

TEST_CASE("a command probe times your own client against your own service and asserts on its output", "[root]") {
    if (skip_unless_root()) return;
    ServiceExperiment exp(R"(
[[service]]
name = "iperf3"
command = ["iperf3", "-s", "-B", "{server}", "-p", "5301"]
ready = { port = 5301 }
[[probe]]
name = "client"
kind = "command"
command = ["iperf3", "-c", "{server}", "-p", "5301", "-t", "1", "-J"]
metrics = [{ name = "received", json = "/end/sum_received/bits_per_second", unit = "bit/s", better = "higher" }]
[[probe]]
name = "ping"
kind = "command"
command = ["ping", "-c", "5", "-i", "0.2", "{server}"]
metrics = [{ name = "avg", regex = "= [0-9.]+/(?<value>[0-9.]+)/", unit = "ms", better = "lower" }]
[[assert]]
probe = "client"
metric = "received"
at_least = "100mbit"
[[assert]]
probe = "ping"
metric = "avg"
at_most = "5ms"
)");
    Cleanup cleanup("svc-cmd");
    auto before = capture();
    int status = 0;
    auto out = exp.run("svc-cmd", &status);
    INFO(out);
    CHECK(status == 0);  // both asserts held
    auto db = (exp.dir / "out" / "results.db").string();
    auto q = [&](const std::string& sql) { return sh(fmt::format("sqlite3 {} \"{}\"", db, sql)); };
    // 2 repeats each: iperf3's own JSON says what it received; ping's avg is read in ms and
    // kept in seconds (a bare veth: well under 5 ms).
    CHECK(q("SELECT count(*), min(value) > 1e8 FROM metrics WHERE name = 'received'") == "2|1\n");
    CHECK(q("SELECT count(*), min(value) > 0, max(value) < 0.005 FROM metrics WHERE name = 'avg'") == "2|1|1\n");
    CHECK(q("SELECT count(*), min(value) > 0 FROM metrics WHERE name = 'wall_time'") == "4|1\n");
    CHECK_THAT(out, Catch::Contains("client.received") && Catch::Contains("ping.avg"));
    CHECK(capture() == before);
}

TEST_CASE("wanlab lab up runs the trial's services until the lab comes down", "[root]") {
    if (skip_unless_root()) return;
    ServiceExperiment exp(R"(
[[service]]
name = "echo"
command = ["iperf3", "-s", "-B", "{server}", "-p", "5399"]
ready = { port = 5399 }
)");
    Cleanup cleanup("svc-up");
    auto before = capture();
    {
        Wanlab up({"lab", "up", exp.path.string(), "--run", "svc-up"});
        REQUIRE(up.wait_for_line("  Ctrl-C, or `wanlab lab down svc-up`, gives everything back."));
        INFO(up.seen());
        CHECK_THAT(up.seen(), Catch::Contains("wanlab lab up: services running: echo on server"));
        remove_services_folder(up.seen());
        CHECK_FALSE(sh("pgrep -f '[i]perf3 -s -B 198.18.0.6 -p 5399'").empty());
        up.signal(SIGTERM);
        CHECK(up.wait() == 0);
    }
    CHECK(sh("pgrep -f '[i]perf3 -s -B 198.18.0.6 -p 5399'").empty());
    CHECK(capture() == before);
}
