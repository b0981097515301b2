// A tool's refusal is that measurement's error, on the real machine (root), through the
// binary: iperf3 refuses a -w the trial's rmem_max clamps; the run goes on, the other variant
// is measured, and the report says which measurements failed, why and what fixes it.
#include "tests/support/root_helper.h"

using namespace wanlab::root_testing;

TEST_CASE("iperf3 refusing a clamped -w fails those measurements only, with the fix, and the run goes on", "[root]") {
    if (skip_unless_root()) return;
    if (sh("command -v iperf3").empty()) FAIL("iperf3 is not installed (scripts/setup installs it)");
    Cleanup cleanup("rf1");
    auto before = capture();
    char t[] = "/tmp/wanlab-refusal-XXXXXX";
    std::filesystem::path dir = ::mkdtemp(t);
    std::ofstream(dir / "x.toml") << R"(name = "refusal"
[[variant]]
name = "default-buffers"
[variant.sysctl]
"net.core.rmem_max" = 212992
"net.core.wmem_max" = 212992
[[variant]]
name = "large-buffers"
[variant.sysctl]
"net.core.rmem_max" = "32M"
"net.core.wmem_max" = "32M"
[[probe]]
name = "bulk"
kind = "throughput"
tool = "iperf3"
rcvbuf = "16M"
[run]
repeats = 2
duration = "1s"
warmup = "0s"
cooldown = "0s"
)";
    int status = 0;
    std::string out = sh(fmt::format("{} run {} --no-vm --run rf1 --out {} --quiet 2>&1", WANLAB_BINARY,
                                     (dir / "x.toml").string(), (dir / "out").string()),
                         &status);
    INFO(out);
    CHECK(status == 0);  // no assert: the run itself completes
    CHECK_THAT(out, Catch::Contains("default-buffers: probe bulk: 2 of 2 repeats not measured: iperf3: socket buffer "
                                    "size not set correctly; iperf3 refuses a -w the kernel clamps: -w 16777216 needs "
                                    "net.core.rmem_max and net.core.wmem_max of at least 8388608 bytes"));
    CHECK_THAT(out, !Catch::Contains("large-buffers: probe bulk"));  // measured
    CHECK(capture() == before);
    std::filesystem::remove_all(dir);
}
