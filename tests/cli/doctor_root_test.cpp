// `wanlab doctor` and `wanlab doctor FILE` (root) against the real machine: each verdict is
// checked against the kernel's own answer (a netem qdisc tried here, /proc's congestion
// control lists), a program that is not installed, and a killed lab's stale journal.
#include "tests/support/root_helper.h"

#include <algorithm>
#include <sstream>

#include <nlohmann/json.hpp>

#include "lab/capabilities.h"

using namespace wanlab::root_testing;

namespace {

std::vector<std::string> words(const std::string& path) {
    std::ifstream in(path);
    std::vector<std::string> out;
    for (std::string w; in >> w;) out.push_back(w);
    return out;
}

/// The verdict doctor gave for `what`, or "" when it gave none.
std::string verdict(const nlohmann::json& report, const std::string& what) {
    for (const auto& v : report["experiment"]["verdicts"])
        if (v["what"] == what) return v["status"].get<std::string>() + ": " + v["detail"].get<std::string>();
    return "";
}

struct TwoFiles {
    std::filesystem::path dir;
    TwoFiles() {
        char t[] = "/tmp/wanlab-doctor-XXXXXX";
        REQUIRE(::mkdtemp(t));
        dir = t;
    }
    std::string write(const std::string& name, const std::string& text) const {
        std::ofstream(dir / name) << text;
        return (dir / name).string();
    }
    ~TwoFiles() { std::filesystem::remove_all(dir); }
};

}  // namespace

TEST_CASE("doctor FILE: netem as the kernel answers, a missing program with the fix, and exit 1 when it cannot run",
          "[root]") {
    if (skip_unless_root()) return;
    TwoFiles files;
    auto linked = files.write("linked.toml", R"(name = "linked"
[link]
delay = "10ms"
[[probe]]
name = "p"
kind = "rtt"
[[service]]
name = "mine"
host = "server"
command = ["wanlab-no-such-program", "--serve"]
)");
    int status = -1;
    auto out = sh(fmt::format("{} doctor {} --json 2>&1", WANLAB_BINARY, linked), &status);
    INFO(out);
    auto report = nlohmann::json::parse(out.substr(out.find('{')));
    CHECK(status == 1);
    CHECK(report["experiment"]["ready"] == false);
    // netem: what this kernel says when the qdisc is tried, or the micro-VM when it lacks it.
    bool has_netem = wanlab::lab::missing_features({"netem"}).empty();
    auto netem = verdict(report, "qdisc netem");
    if (has_netem)
        CHECK_THAT(netem, Catch::StartsWith("yes"));
    else if (report["micro_vm"]["ready"] == true)
        CHECK_THAT(netem, Catch::StartsWith("micro-VM: this kernel lacks it"));
    else
        CHECK_THAT(netem, Catch::StartsWith("NO: ") && Catch::Contains("The micro-VM cannot boot here yet"));
    CHECK(verdict(report, "probe p (rtt)") == "yes: built in");
    CHECK(verdict(report, "service mine (wanlab-no-such-program)") == "NO: wanlab-no-such-program is not installed");
    // The text says the same, and its verdict.
    auto text = sh(fmt::format("{} doctor {} 2>&1", WANLAB_BINARY, linked), &status);
    CHECK(status == 1);
    CHECK_THAT(text, Catch::Contains("cannot run here yet: fix what says NO above"));
}

TEST_CASE("doctor FILE: a congestion control a namespace may not choose is named with the sysctl that allows it",
          "[root]") {
    if (skip_unless_root()) return;
    auto available = words("/proc/sys/net/ipv4/tcp_available_congestion_control");
    auto allowed = words("/proc/sys/net/ipv4/tcp_allowed_congestion_control");
    std::string refused, fine = allowed.empty() ? "reno" : allowed.front();
    for (const auto& c : available)
        if (std::find(allowed.begin(), allowed.end(), c) == allowed.end()) refused = c;
    TwoFiles files;
    // No [link]: nothing moves the run into the micro-VM, so this kernel's lists decide.
    auto body = [](const std::string& cc) {
        return fmt::format(R"(name = "cc"
[sysctl.client]
"net.ipv4.tcp_congestion_control" = "{}"
[[probe]]
name = "p"
kind = "rtt"
)",
                           cc);
    };
    int status = -1;
    auto ok = sh(fmt::format("{} doctor {} --json", WANLAB_BINARY, files.write("fine.toml", body(fine))), &status);
    INFO(ok);
    CHECK(status == 0);
    auto report = nlohmann::json::parse(ok);
    CHECK(verdict(report, "congestion control " + fine) == "yes: ");
    CHECK(verdict(report, "sysctl net.ipv4.tcp_congestion_control") == "yes: ");
    CHECK(report["experiment"]["ready"] == true);
    if (refused.empty()) {
        WARN("every available congestion control is allowed in namespaces here: no refusal to check");
        return;
    }
    auto no =
        sh(fmt::format("{} doctor {} --json", WANLAB_BINARY, files.write("refused.toml", body(refused))), &status);
    INFO(no);
    CHECK(status == 1);
    auto r2 = nlohmann::json::parse(no);
    CHECK_THAT(verdict(r2, "congestion control " + refused),
               Catch::StartsWith("NO: a namespace may choose only what net.ipv4.tcp_allowed_congestion_control "
                                 "lists; to allow " +
                                 refused + " too: sysctl -w net.ipv4.tcp_allowed_congestion_control=\""));
    // The fix it gives works: a namespace may then choose it (and the list goes back).
    auto fix = r2["congestion_control"]["fix"].get<std::string>();
    auto was = read_sysctl("net.ipv4.tcp_allowed_congestion_control");
    sh(fix.substr(fix.find("sysctl -w")));
    auto chose =
        sh(fmt::format("ip netns add wlt-doc && ip netns exec wlt-doc sysctl -qw "
                       "net.ipv4.tcp_congestion_control={0} && ip netns exec wlt-doc cat "
                       "/proc/sys/net/ipv4/tcp_congestion_control; ip netns del wlt-doc",
                       refused));
    sh(fmt::format("sysctl -qw net.ipv4.tcp_allowed_congestion_control=\"{}\"", was));
    CHECK(chose == refused + "\n");
}

TEST_CASE("doctor lists a killed lab's stale journal with the command that restores it", "[root]") {
    if (skip_unless_root()) return;
    ExperimentFile file;
    Cleanup cleanup("fdoc");
    {
        Wanlab up({"lab", "up", file.path.string(), "--run", "fdoc", "--hold-after", "journal"});
        REQUIRE(up.wait_for_line("wanlab lab up: stage journal done"));
        up.signal(SIGKILL);
        up.wait();
    }
    auto out = sh(fmt::format("{} doctor", WANLAB_BINARY));
    INFO(out);
    CHECK_THAT(out, Catch::Contains("fdoc") && Catch::Contains("STALE (pid") &&
                        Catch::Contains("`wanlab restore fdoc` gives back what it changed"));
    auto j = nlohmann::json::parse(sh(fmt::format("{} doctor --json", WANLAB_BINARY)));
    bool listed = false;
    for (const auto& e : j["journals"])
        if (e["run"] == "fdoc") listed = e["state"] == "stale";
    CHECK(listed);
    sh(fmt::format("{} restore fdoc", WANLAB_BINARY));
    CHECK_THAT(sh(fmt::format("{} doctor", WANLAB_BINARY)), !Catch::Contains("fdoc"));
}
