// [lab] mode = "hosts" across machines over real OpenSSH (root), through the binary: the
// server machine is a network namespace running its own sshd (Debian's openssh-server, keys
// made per test), reached as ssh reaches any host; the client is this machine. A sysctl-only
// experiment is set on the server during the run and given back; a controller killed with
// SIGKILL, and a killed ssh client, each leave the server given back within 10 s; fields
// holding spaces, quotes, $(...) and ; run nothing. Needs no netem.
#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include "lab/capabilities.h"
#include "tests/support/root_helper.h"

using namespace wanlab::root_testing;

namespace {

constexpr const char* kNs = "wl-hosts-srv";
constexpr const char* kServer = "198.18.9.2";

/// Another machine: network namespace `ns` behind a veth (SUBNET.1 here on `host_if`,
/// SUBNET.2 there) with its own sshd, and an ssh config that reaches it as `alias`. By
/// default the server, kNs at kServer. Undoes: the sshd and every process in the namespace,
/// the namespace (and with it the veth), the files.
struct SshMachine {
    std::string ns, alias, host_if, subnet;
    std::filesystem::path dir;
    std::filesystem::path config;
    SshMachine(std::string ns_ = kNs, std::string alias_ = "wlh-server", std::string host_if_ = "wlh0",
               std::string subnet_ = "198.18.9")
        : ns(std::move(ns_)), alias(std::move(alias_)), host_if(std::move(host_if_)), subnet(std::move(subnet_)) {
        char t[] = "/tmp/wanlab-hosts-XXXXXX";
        dir = ::mkdtemp(t);
        config = dir / "ssh_config";
        try {
            setup();
        } catch (...) {  // a failed REQUIRE: the destructor will not run
            teardown();
            std::filesystem::remove_all(dir);
            throw;
        }
    }
    std::string address() const { return subnet + ".2"; }
    void setup() {
        teardown();
        auto d = dir.string();
        REQUIRE(
            sh(fmt::format("set -e; ip netns add {0}; ip link add {3} type veth peer name wlh1 netns {0}; "
                           "ip addr add {4}.1/30 dev {3}; ip link set {3} up; "
                           "ip -n {0} addr add {1}/30 dev wlh1; ip -n {0} link set wlh1 up; ip -n {0} link set lo up; "
                           "ssh-keygen -q -t ed25519 -N '' -f {2}/host_key; ssh-keygen -q -t ed25519 -N '' -f {2}/key; "
                           "cp {2}/key.pub {2}/authorized_keys; mkdir -p /run/sshd; echo ok",
                           ns, address(), d, host_if, subnet)) == "ok\n");
        std::ofstream(dir / "sshd_config") << fmt::format(
            "Port 22\nListenAddress {}\nHostKey {}/host_key\nAuthorizedKeysFile {}/authorized_keys\n"
            "PermitRootLogin prohibit-password\nStrictModes no\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nUsePAM no\nPidFile {}/sshd.pid\nLogLevel ERROR\n",
            address(), d, d, d);
        std::ofstream(config) << host_entry();
        int status = 0;
        sh(fmt::format("ip netns exec {} /usr/sbin/sshd -f {}/sshd_config -E {}/sshd.log", ns, d, d), &status);
        REQUIRE(status == 0);
        REQUIRE(eventually(
            [&] {
                return sh(fmt::format("ssh -F {} -o BatchMode=yes {} echo up 2>&1", config.string(), alias)) == "up\n";
            },
            std::chrono::seconds(10)));
    }
    /// Its Host entry for an ssh config.
    std::string host_entry() const {
        return fmt::format(
            "Host {}\n  HostName {}\n  User root\n  IdentityFile {}/key\n  IdentitiesOnly yes\n"
            "  UserKnownHostsFile /dev/null\n  StrictHostKeyChecking no\n  LogLevel ERROR\n",
            alias, address(), dir.string());
    }
    ~SshMachine() {
        teardown();
        std::filesystem::remove_all(dir);
    }
    void teardown() const {
        sh(
            fmt::format("ip netns pids {} 2>/dev/null | xargs -r kill -9; ip netns del {} 2>/dev/null; "
                        "ip link del {} 2>/dev/null",
                        ns, ns, host_if));
    }
    /// A sysctl as the machine sees it.
    std::string sysctl(const std::string& key) const {
        auto v = sh(fmt::format("ip netns exec {} sysctl -n {}", ns, key));
        while (!v.empty() && v.back() == '\n') v.pop_back();
        return v;
    }
    /// The machine's processes other than its sshd and ssh's sessions.
    std::string strays() const {
        return sh(
            fmt::format("for p in $(ip netns pids {}); do c=$(cat /proc/$p/comm); "
                        "case $c in sshd) ;; *) echo $c;; esac; done",
                        ns));
    }
};

/// An experiment across this machine (client) and the SshMachine (server).
struct HostsExperiment {
    std::filesystem::path dir, path;
    HostsExperiment(const SshMachine& m, const std::string& body, const std::string& server_extra = "") {
        char t[] = "/tmp/wanlab-hostsexp-XXXXXX";
        dir = ::mkdtemp(t);
        path = dir / "hosts.toml";
        std::ofstream(path) << fmt::format(
            "name = \"hosts\"\n[lab]\nmode = \"hosts\"\n[hosts]\nssh_config = \"{}\"\n[hosts.client]\nssh = "
            "\"local\"\n[hosts.server]\nssh = \"wlh-server\"\naddress = \"{}\"\nwanlab = \"{}\"\n{}\n"
            "[run]\nrepeats = 1\nwarmup = \"0s\"\ncooldown = \"0s\"\n{}",
            m.config.string(), kServer, WANLAB_BINARY, server_extra, body);
    }
    ~HostsExperiment() { std::filesystem::remove_all(dir); }
    std::vector<std::string> run_args(const std::string& id) const {
        return {"run", path.string(), "--run", id, "--out", (dir / "out").string(), "--quiet"};
    }
};

// The server's tcp_rmem, changed by the run, and the iperf3 service that reports it.
std::string raised_rmem(const SshMachine& m) {
    auto now = m.sysctl("net.ipv4.tcp_rmem");
    auto max = std::stoll(now.substr(now.rfind('\t') + 1));
    return fmt::format("4096\t87380\t{}", max + 4096);
}

std::string body_with(const std::string& rmem, const std::string& duration) {
    auto triplet = rmem;
    for (auto& c : triplet)
        if (c == '\t') c = ' ';
    return fmt::format(R"(
[sysctl.server]
"net.ipv4.tcp_rmem" = "{}"
[[service]]
name = "iperf3"
host = "server"
command = ["sh", "-c", "cat /proc/sys/net/ipv4/tcp_rmem > /tmp/wlh-seen; exec iperf3 -s -B {{server}} -p 5201"]
ready = {{ port = 5201 }}
[[probe]]
name = "bulk"
kind = "throughput"
tool = "iperf3"
server_port = 5201
duration = "{}"
)",
                       triplet, duration);
}

/// A probe's metric in a run's results database (one measurement of it).
double metric_of(const std::string& db, const std::string& probe, const std::string& name) {
    auto v =
        sh(fmt::format("sqlite3 {} \"SELECT x.value FROM metrics x JOIN measurements s ON x.measurement_id = "
                       "s.id WHERE s.probe = '{}' AND x.name = '{}'\"",
                       db, probe, name));
    INFO(probe << "." << name << " = " << v);
    REQUIRE_FALSE(v.empty());
    return std::stod(v);
}

}  // namespace

TEST_CASE("a sysctl experiment across machines sets the server's own sysctl over ssh and gives it back", "[root]") {
    if (skip_unless_root()) return;
    SshMachine m;
    auto before = m.sysctl("net.ipv4.tcp_rmem");
    auto want = raised_rmem(m);
    HostsExperiment exp(m, body_with(want, "1s"));
    Cleanup cleanup("hosts-ok");
    std::filesystem::remove("/tmp/wlh-seen");
    int status = 0;
    auto args = exp.run_args("hosts-ok");
    std::string cmd = WANLAB_BINARY;
    for (const auto& a : args) cmd += " " + a;
    auto out = sh(cmd + " 2>&1", &status);
    INFO(out);
    REQUIRE(status == 0);
    // The service on the server started after the server's sysctl was set...
    std::ifstream seen("/tmp/wlh-seen");
    std::string line;
    std::getline(seen, line);
    CHECK(line == want);
    // ... the probe measured through it from here ...
    auto rate = sh(fmt::format("sqlite3 {} \"SELECT value FROM metrics WHERE name = 'throughput'\"",
                               (exp.dir / "out" / "results.db").string()));
    CHECK(std::stod(rate) > 1e6);
    // ... and the server is as it was: its sysctl, no process left, no journal.
    CHECK(m.sysctl("net.ipv4.tcp_rmem") == before);
    // At once: the agent answers `end` with everything of the run gone, its watchdog too.
    INFO("left: " << m.strays());
    CHECK(m.strays().empty());
    CHECK_FALSE(std::filesystem::exists("/run/wanlab/hosts-ok-server.journal"));
    CHECK_FALSE(std::filesystem::exists("/run/wanlab/hosts-ok-client.journal"));
    std::filesystem::remove("/tmp/wlh-seen");
}

TEST_CASE("a controller killed with SIGKILL mid-run leaves the server machine given back within 10 s, and resumes",
          "[root]") {
    if (skip_unless_root()) return;
    SshMachine m;
    auto before = m.sysctl("net.ipv4.tcp_rmem");
    auto want = raised_rmem(m);
    HostsExperiment exp(m, body_with(want, "60s"));
    Cleanup cleanup("hosts-kill");
    // What a SIGKILLed controller cannot remove itself: its ssh control folder (empty once ssh
    // is gone) and the log of the local agent's watchdog, which gave this machine back.
    auto before_dirs = sh("ls -d /tmp/wanlab-ssh-* 2>/dev/null");
    struct Leftovers {
        std::string before;
        ~Leftovers() {
            for (auto& e : std::filesystem::directory_iterator("/tmp"))
                if (e.path().filename().string().starts_with("wanlab-ssh-") &&
                    before.find(e.path().string()) == std::string::npos)
                    std::filesystem::remove_all(e.path());
            std::filesystem::remove("/run/wanlab/hosts-kill-client.watchdog.log");
            std::filesystem::remove("/run/wanlab/hosts-kill-server.watchdog.log");
        }
    } leftovers{before_dirs};
    Wanlab w(exp.run_args("hosts-kill"));
    REQUIRE(eventually(
        [&] { return m.sysctl("net.ipv4.tcp_rmem") == want && m.strays().find("iperf3") != std::string::npos; },
        std::chrono::seconds(30)));
    w.signal(SIGKILL);
    w.wait();
    auto killed = std::chrono::steady_clock::now();
    CHECK(eventually([&] { return m.sysctl("net.ipv4.tcp_rmem") == before && m.strays().empty(); },
                     std::chrono::seconds(10)));
    INFO("given back after " << std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count()
                             << " s; strays: " << m.strays());
    CHECK(eventually([] { return !std::filesystem::exists("/run/wanlab/hosts-kill-server.journal"); },
                     std::chrono::seconds(10)));
    // Resumed across the machines (shorter, which is another --set: --force, and noted).
    int status = -1;
    auto resumed = sh(fmt::format("{} run {} --out {} --resume --quiet --force --set probe.bulk.duration=2s 2>&1",
                                  WANLAB_BINARY, exp.path.string(), (exp.dir / "out").string()),
                      &status);
    INFO(resumed);
    CHECK(status == 0);
    CHECK_THAT(resumed, Catch::Contains("session 1: ") && Catch::Contains("killed") &&
                            Catch::Contains("the run had --set none, this one probe.bulk.duration=2s (--force)"));
    CHECK(sh(fmt::format("sqlite3 {}/out/results.db \"select status || ' ' || (select count(*) from measurements) "
                         "from runs\"",
                         exp.dir.string())) == "complete 1\n");
    CHECK(m.sysctl("net.ipv4.tcp_rmem") == before);
    INFO("left after the resumed run: " << m.strays());
    CHECK(m.strays().empty());
}

TEST_CASE("a killed ssh client leaves the server machine given back within 10 s, and the run fails saying so",
          "[root]") {
    if (skip_unless_root()) return;
    SshMachine m;
    auto before = m.sysctl("net.ipv4.tcp_rmem");
    auto want = raised_rmem(m);
    HostsExperiment exp(m, body_with(want, "20s"));
    Cleanup cleanup("hosts-ssh");
    Wanlab w(exp.run_args("hosts-ssh"));
    REQUIRE(eventually([&] { return m.sysctl("net.ipv4.tcp_rmem") == want; }, std::chrono::seconds(30)));
    sh(fmt::format("pkill -KILL -P {} -x ssh", w.pid()));
    CHECK(eventually([&] { return m.sysctl("net.ipv4.tcp_rmem") == before && m.strays().empty(); },
                     std::chrono::seconds(10)));
    CHECK(w.wait() != 0);
}

TEST_CASE("a field with spaces, quotes, $(...) and a semicolon reaches ssh as one word and runs nothing", "[root]") {
    if (skip_unless_root()) return;
    SshMachine m;
    for (const char* f : {"/tmp/wlh-pwned1", "/tmp/wlh-pwned2", "/tmp/wlh-pwned3"}) std::filesystem::remove(f);
    const std::string hostile =
        "/nonexistent dir/wanlab'; touch /tmp/wlh-pwned1; echo \\\"$(touch /tmp/wlh-pwned2)\\\" `touch "
        "/tmp/wlh-pwned3`";
    HostsExperiment exp(m, "[[probe]]\nname = \"ping\"\nkind = \"rtt\"\nmethod = \"icmp\"\ncount = 2\n");
    // The same file with the hostile wanlab path for the server.
    std::string text;
    {
        std::ifstream in(exp.path);
        text.assign(std::istreambuf_iterator<char>(in), {});
    }
    text.replace(text.find(fmt::format("wanlab = \"{}\"", WANLAB_BINARY)),
                 std::string(fmt::format("wanlab = \"{}\"", WANLAB_BINARY)).size(), "wanlab = \"" + hostile + "\"");
    std::ofstream(exp.path) << text;
    int status = 0;
    auto out = sh(fmt::format("{} run {} --run hosts-quote --out {} --quiet 2>&1", WANLAB_BINARY, exp.path.string(),
                              (exp.dir / "out").string()),
                  &status);
    INFO(out);
    CHECK(status != 0);
    CHECK_THAT(out, Catch::Contains("server (wlh-server): there is no `/nonexistent dir/wanlab'; touch"));
    for (const char* f : {"/tmp/wlh-pwned1", "/tmp/wlh-pwned2", "/tmp/wlh-pwned3"}) {
        INFO(f);
        CHECK_FALSE(std::filesystem::exists(f));
    }
    CHECK_FALSE(std::filesystem::exists("/run/wanlab/hosts-quote-client.journal"));
}

TEST_CASE("[link] across machines on a kernel without netem is refused before anything changes, here and on a router",
          "[root]") {
    if (skip_unless_root()) return;
    if (wanlab::lab::missing_features({"netem"}).empty()) {
        WARN("this kernel has sch_netem: nothing to refuse here (the micro-VM's host-mode suite runs the conditions)");
        return;
    }
    SshMachine m;
    auto state = [] { return sh("tc qdisc show; tc filter show dev wlh0; ip -o link show | cut -d' ' -f2"); };
    auto before = state();
    const std::string body = "[link]\nrtt = \"40ms\"\n[[probe]]\nkind = \"rtt\"\nmethod = \"icmp\"\ncount = 3\n";
    auto run = [](const HostsExperiment& exp, const std::string& id, int& status) {
        std::string cmd = WANLAB_BINARY;
        for (const auto& a : exp.run_args(id)) cmd += " " + a;
        return sh(cmd + " 2>&1", &status);
    };
    {
        // No router: this machine's interface toward the server, so this kernel: the controller says so.
        HostsExperiment exp(m, body);
        Cleanup cleanup("nolink-1");
        int status = 0;
        auto out = run(exp, "nolink-1", status);
        INFO(out);
        CHECK(status == 2);
        CHECK_THAT(out, Catch::Contains("this kernel lacks netem") &&
                            Catch::Contains("hosts mode impairs this machine's own"));
    }
    {
        // The far machine as the router: its agent checks its own kernel before it changes anything.
        HostsExperiment exp(m, body,
                            fmt::format("[hosts.router]\nssh = \"wlh-server\"\nwanlab = \"{}\"\n", WANLAB_BINARY));
        Cleanup cleanup("nolink-2");
        int status = 0;
        auto out = run(exp, "nolink-2", status);
        INFO(out);
        CHECK(status != 0);
        CHECK_THAT(out, Catch::Contains("this machine's kernel lacks netem, which the link conditions need here"));
        CHECK_FALSE(std::filesystem::exists("/run/wanlab/nolink-2-router.journal"));
    }
    CHECK(state() == before);
    CHECK(sh(fmt::format("ip netns exec {} tc qdisc show | grep -c 'htb\\|netem\\|ingress'", m.ns)) == "0\n");
    CHECK(eventually([&] { return m.strays().empty(); }, std::chrono::seconds(5)));
}

TEST_CASE("built-in probes across machines: the server's agent runs their servers under the server's own sysctls",
          "[root]") {
    if (skip_unless_root()) return;
    SshMachine m;
    auto before = m.sysctl("net.ipv4.tcp_rmem");
    // The server's autotuning may grow a receive buffer to 256 KiB; this machine's (its
    // default, several MiB) is not changed, so what the throughput probe reports as granted
    // is the server's own socket under the server's own sysctl.
    HostsExperiment exp(m, R"(
[sysctl.server]
"net.ipv4.tcp_rmem" = "4096 65536 262144"
[[probe]]
name = "bulk"
kind = "throughput"
duration = "2s"
[[probe]]
name = "stall"
kind = "rr"
duration = "1s"
server_split_write = true
server_nodelay = false
client_quickack = false
)");
    Cleanup cleanup("hosts-far");
    int status = 0;
    std::string cmd = WANLAB_BINARY;
    for (const auto& a : exp.run_args("hosts-far")) cmd += " " + a;
    auto out = sh(cmd + " 2>&1", &status);
    INFO(out);
    REQUIRE(status == 0);
    auto db = (exp.dir / "out" / "results.db").string();
    auto metric = [&db](const std::string& probe, const std::string& name) { return metric_of(db, probe, name); };
    CHECK(metric("bulk", "throughput") > 1e8);
    CHECK(metric("bulk", "rcvbuf_granted") <= 262144);
    CHECK(metric("bulk", "rcvbuf_granted") > 0);
    // The delayed-ACK stall across machines: the far server wrote in two with Nagle on.
    CHECK(metric("stall", "latency_p50") >= 0.035);
    CHECK(metric("stall", "latency_p50") < 0.25);
    // The server machine's kernel counters were recorded beside this one's.
    auto counters = sh(fmt::format("sqlite3 {} \"SELECT counters FROM measurements WHERE probe = 'bulk'\"", db));
    auto j = nlohmann::json::parse(counters);
    REQUIRE(j.contains("server"));
    CHECK(j.at("server").value("Tcp.InSegs", 0.0) > 1000);
    CHECK(j.contains("client"));
    // And the server is as it was.
    CHECK(m.sysctl("net.ipv4.tcp_rmem") == before);
    CHECK(eventually([&] { return m.strays().empty(); }, std::chrono::seconds(5)));
}

TEST_CASE("a client machine other than this one runs the probes through its agent, under its own sysctls", "[root]") {
    if (skip_unless_root()) return;
    SshMachine server;
    SshMachine client("wl-hosts-cli", "wlh-client", "wlh2", "198.18.11");
    // The two machines' own path: a veth between them, which this machine does not cross.
    REQUIRE(sh(fmt::format("set -e; ip -n {0} link add wlx0 type veth peer name wlx1 netns {1}; "
                           "ip -n {0} addr add 198.18.12.1/30 dev wlx0; ip -n {0} link set wlx0 up; "
                           "ip -n {1} addr add 198.18.12.2/30 dev wlx1; ip -n {1} link set wlx1 up; echo ok",
                           client.ns, server.ns)) == "ok\n");
    auto dir = client.dir / "exp";
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "ssh_config") << client.host_entry() << server.host_entry();
    auto client_before = client.sysctl("net.ipv4.tcp_rmem");
    std::ofstream(dir / "exp.toml") << fmt::format(R"(name = "remote-client"
[lab]
mode = "hosts"
[hosts]
ssh_config = "{0}/ssh_config"
[hosts.client]
ssh = "wlh-client"
wanlab = "{1}"
[hosts.server]
ssh = "wlh-server"
address = "198.18.12.2"
wanlab = "{1}"
[sysctl.client]
"net.ipv4.tcp_rmem" = "4096 65536 262144"
[[probe]]
name = "down"
kind = "throughput"
direction = "download"
duration = "2s"
[[probe]]
name = "stall"
kind = "rr"
duration = "1s"
server_split_write = true
server_nodelay = false
client_quickack = false
[run]
repeats = 1
warmup = "0s"
cooldown = "0s"
)",
                                                   dir.string(), WANLAB_BINARY);
    Cleanup cleanup("hosts-cli");
    int status = 0;
    auto out = sh(fmt::format("{} run {}/exp.toml --run hosts-cli --out {}/out --quiet 2>&1", WANLAB_BINARY,
                              dir.string(), dir.string()),
                  &status);
    INFO(out);
    REQUIRE(status == 0);
    auto db = (dir / "out" / "results.db").string();
    auto metric = [&db](const std::string& probe, const std::string& name) { return metric_of(db, probe, name); };
    // Between the two namespaces, not through this machine: the download's receiver is the
    // client machine's socket, autotuned under the client's own 256 KiB maximum.
    CHECK(metric("down", "throughput") > 1e8);
    CHECK(metric("down", "rcvbuf_granted") <= 262144);
    CHECK(metric("down", "cwnd") > 0);  // the sender's, on the server, through this controller
    CHECK(metric("stall", "latency_p50") >= 0.035);
    CHECK(metric("stall", "latency_p50") < 0.25);
    auto counters = nlohmann::json::parse(
        sh(fmt::format("sqlite3 {} \"SELECT counters FROM measurements WHERE probe = 'down'\"", db)));
    REQUIRE(counters.contains("client"));
    REQUIRE(counters.contains("server"));
    CHECK(counters.at("client").value("Tcp.InSegs", 0.0) > 1000);  // the client machine's own kernel
    auto here = sh(fmt::format("sqlite3 {} \"SELECT notes FROM measurements WHERE probe = 'down'\"", db));
    CHECK(here.find("probe server on the server machine") != std::string::npos);
    // Each machine's environment, as it was before the run changed it.
    auto env = nlohmann::json::parse(sh(fmt::format("sqlite3 {} \"SELECT env FROM runs\"", db)));
    CHECK(env.at("machines").at("client").at("ssh") == "wlh-client");
    CHECK(env.at("machines").at("client").at("sysctls_before").at("net.ipv4.tcp_rmem") == client_before);
    CHECK_FALSE(env.at("machines").at("server").at("kernel").get<std::string>().empty());
    CHECK(client.sysctl("net.ipv4.tcp_rmem") == client_before);
    CHECK(eventually([&] { return client.strays().empty() && server.strays().empty(); }, std::chrono::seconds(5)));
}
