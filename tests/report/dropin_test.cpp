// `wanlab results sysctl`'s text: one trial's sysctls as a sysctl.d drop-in (report/dropin.cpp).
#include <catch2/catch.hpp>

#include <functional>

#include "core/error.h"
#include "report/report.h"
#include "tests/report/fixtures.h"

using namespace wanlab;
using namespace wanlab::report;
using Catch::Matchers::Contains;

namespace {

/// Trial 4 of the buffer sweep (large-buffers @ link.rtt=40ms), which also set per-host keys.
results::RunData with_host_keys() {
    auto d = fixtures::buffer_sweep();
    d.trials[3].sysctls["server:net.core.rmem_max"] = "134217728";
    d.trials[3].sysctls["client:net.ipv4.tcp_congestion_control"] = "bbr";
    return d;
}

std::string message_of(const std::function<void()>& fn) {
    try {
        fn();
    } catch (const InputError& e) {
        return e.what();
    }
    return "no error";
}

}  // namespace

TEST_CASE("sysctl drop-in of a buffer-sweep trial names the run, the trial and each key's origin", "[report][dropin]") {
    auto d = fixtures::buffer_sweep();
    CHECK(sysctl_dropin(d, d.trials[3], "") ==
          R"(# sysctl.d drop-in written by `wanlab results sysctl`: the sysctls of one measured
# configuration. Install as /etc/sysctl.d/90-wanlab.conf, apply with `sysctl --system`.
#
# run:        20261130T041209-ab12 (buffer-sweep)
# experiment: examples/buffer-sweep.toml
# trial:      4 (aaaa0004): variant large-buffers @ link.rtt=40ms
# measured:   2026-11-30T04:12:09Z on lab1, kernel 6.1.0-18-amd64
#             where: host
# result:     bulk.throughput median 250.00 Mbit/s
# hosts:      every sysctl is global (the whole machine)

# set by variant large-buffers (examples/buffer-sweep.toml)
# measured in run 20261130T041209-ab12 trial 4 (aaaa0004): bulk.throughput median 250.00 Mbit/s
net.core.rmem_max = 67108864

# set by variant large-buffers (examples/buffer-sweep.toml)
# measured in run 20261130T041209-ab12 trial 4 (aaaa0004): bulk.throughput median 250.00 Mbit/s
net.core.wmem_max = 67108864

# set by variant large-buffers (examples/buffer-sweep.toml)
# measured in run 20261130T041209-ab12 trial 4 (aaaa0004): bulk.throughput median 250.00 Mbit/s
net.ipv4.tcp_rmem = 4096 131072 67108864

# set by variant large-buffers (examples/buffer-sweep.toml)
# measured in run 20261130T041209-ab12 trial 4 (aaaa0004): bulk.throughput median 250.00 Mbit/s
net.ipv4.tcp_wmem = 4096 16384 67108864
)");
}

TEST_CASE("sysctl drop-in writes a value's fields space-separated, as sysctl.d takes them", "[report][dropin]") {
    auto d = fixtures::buffer_sweep();
    auto out = sysctl_dropin(d, d.trials[3], "");
    CHECK(out.find('\t') == std::string::npos);
    CHECK_THAT(out, Contains("\nnet.ipv4.tcp_rmem = 4096 131072 67108864\n"));
    CHECK_THAT(out, Contains("\nnet.ipv4.tcp_wmem = 4096 16384 67108864\n"));
}

TEST_CASE("sysctl drop-in comments out each lab host's own sysctls unless --host picks one", "[report][dropin]") {
    auto d = with_host_keys();
    auto all = sysctl_dropin(d, d.trials[3], "");
    CHECK_THAT(all, Contains("commented out under that host: pick one with --host NAME"));
    CHECK_THAT(all, Contains("\n# net.ipv4.tcp_congestion_control = bbr\n"));
    CHECK_THAT(all, Contains("\n# net.core.rmem_max = 134217728\n"));
    CHECK_THAT(all, Contains("\nnet.core.rmem_max = 67108864\n"));

    auto server = sysctl_dropin(d, d.trials[3], "server");
    CHECK_THAT(server, Contains("# hosts:      for lab host server: the global sysctls and server's own\n"));
    // The server's own value replaces the global one: sysctl.d would apply both, the last winning.
    CHECK_THAT(server, Contains("\nnet.core.rmem_max = 134217728\n"));
    CHECK(server.find("net.core.rmem_max = 67108864") == std::string::npos);
    CHECK(server.find("tcp_congestion_control") == std::string::npos);
    CHECK_THAT(server, Contains("\n# set by variant large-buffers on host server (in place of the global 67108864) "
                                "(examples/buffer-sweep.toml)\n"));
    CHECK_THAT(server, Contains("\nnet.ipv4.tcp_rmem = 4096 131072 67108864\n"));

    CHECK_THAT(sysctl_dropin(d, d.trials[3], "router"),
               Contains("# hosts:      for lab host router: the global sysctls and router's own (it set none of its "
                        "own)\n"));

    auto client = sysctl_dropin(d, d.trials[3], "client");
    CHECK_THAT(client, Contains("\nnet.ipv4.tcp_congestion_control = bbr\n"));
    CHECK_THAT(client, Contains("\nnet.core.rmem_max = 67108864\n"));
}

TEST_CASE("sysctl drop-in warns that values measured in the micro-VM were measured on its kernel", "[report][dropin]") {
    auto d = fixtures::buffer_sweep();
    CHECK(sysctl_dropin(d, d.trials[3], "").find("WARNING") == std::string::npos);
    d.run.env.where = "vm (tcg, 2 cpus)";
    d.run.env.kernel = "6.1.0-28-amd64";
    d.run.env.host = results::MachineEnvironment{"local", "laptop", "6.8.0-45-generic", "x86_64", {}};
    auto out = sysctl_dropin(d, d.trials[3], "");
    CHECK_THAT(out, Contains("#             where: vm (tcg, 2 cpus)\n"));
    CHECK_THAT(out, Contains("# WARNING: these values were measured in wanlab's micro-VM, on its kernel "
                             "6.1.0-28-amd64,\n# not on the machine that started it (laptop, kernel "
                             "6.8.0-45-generic)."));
}

TEST_CASE("sysctl drop-in of a trial that set no sysctl says so under its header", "[report][dropin]") {
    auto d = fixtures::buffer_sweep();
    d.trials[3].sysctls.clear();
    auto out = sysctl_dropin(d, d.trials[3], "");
    CHECK_THAT(out, Contains("# trial:      4 (aaaa0004): variant large-buffers @ link.rtt=40ms\n"));
    CHECK_THAT(out, Contains("\n# This configuration sets no sysctl: it measured the kernel's values as they were.\n"));
    CHECK(out.find(" = ") == std::string::npos);
}

TEST_CASE("sysctl drop-in says a value every variant shares came from the experiment, not the variant",
          "[report][dropin]") {
    auto d = fixtures::buffer_sweep();
    for (auto& t : d.trials) t.sysctls["net.ipv4.tcp_congestion_control"] = "cubic";
    auto out = sysctl_dropin(d, d.trials[3], "");
    CHECK_THAT(out,
               Contains("\n# set alike for every variant (the experiment's [sysctl]) (examples/buffer-sweep.toml)\n"
                        "# measured in run 20261130T041209-ab12 trial 4 (aaaa0004): bulk.throughput median "
                        "250.00 Mbit/s\nnet.ipv4.tcp_congestion_control = cubic\n"));
    CHECK_THAT(out, Contains("\n# set by variant large-buffers (examples/buffer-sweep.toml)\n# measured in run "));
}

TEST_CASE("sysctl drop-in keeps a foreign database's newlines out of its lines", "[report][dropin][security]") {
    auto d = fixtures::buffer_sweep();
    d.trials[3].sysctls = {{"net.core.rmem_max", "1\nkernel.panic = 1"}};
    d.run.file = "x.toml\nkernel.panic = 1";
    auto out = sysctl_dropin(d, d.trials[3], "");
    CHECK(out.find("\nkernel.panic") == std::string::npos);
    CHECK_THAT(out, Contains("\nnet.core.rmem_max = 1 kernel.panic = 1\n"));
}

TEST_CASE("results sysctl picks the trial of a variant at a sweep point by its label or a unique part",
          "[report][dropin]") {
    auto d = fixtures::buffer_sweep();
    auto exact = trial_for(d, "large-buffers", "link.rtt=40ms", "");
    REQUIRE(exact.trial);
    CHECK(exact.trial->index == 4);
    CHECK(exact.note.empty());
    auto part = trial_for(d, "default-buffers", "20ms", "");
    REQUIRE(part.trial);
    CHECK(part.trial->index == 1);
    CHECK(part.note == "--point \"20ms\" matched sweep point \"link.rtt=20ms\"");
}

TEST_CASE("results sysctl refuses an unknown variant or point and names the choices", "[report][dropin]") {
    auto d = fixtures::buffer_sweep();
    CHECK(message_of([&] { trial_for(d, "huge-buffers", "40ms", ""); }) ==
          "run 20261130T041209-ab12 has no variant \"huge-buffers\"; its variants: default-buffers, large-buffers "
          "(give one with --variant)");
    CHECK(message_of([&] { trial_for(d, "large-buffers", "", ""); }) ==
          "run 20261130T041209-ab12 measured 2 sweep points: \"link.rtt=20ms\", \"link.rtt=40ms\"; pick one with "
          "--point (the label or a unique part of it, e.g. --point 20ms)");
    CHECK(message_of([&] { trial_for(d, "large-buffers", "80ms", ""); }) ==
          "--point \"80ms\" matches none of run 20261130T041209-ab12's sweep points; its points: \"link.rtt=20ms\", "
          "\"link.rtt=40ms\" (give the label or a part of it only one contains)");
    CHECK_THAT(message_of([&] { trial_for(d, "large-buffers", "ms", ""); }), Contains("matches several"));
    CHECK(message_of([&] { trial_for(d, "large-buffers", "40ms", "sever"); }) ==
          "--host \"sever\" is no lab host of run 20261130T041209-ab12; its hosts: client, host, router, server");
}

TEST_CASE("results sysctl needs no --point when the run has one", "[report][dropin]") {
    auto d = fixtures::api_run({0, 0, 0}, {0, 0, 0}, 100);
    auto c = trial_for(d, "bbr", "", "");
    REQUIRE(c.trial);
    CHECK(c.trial->index == 2);
    CHECK_THAT(sysctl_dropin(d, *c.trial, ""), Contains("sets no sysctl"));
}
