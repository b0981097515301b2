#include "cli/command.h"

namespace wanlab::cli {

namespace {
constexpr Command kCommands[] = {
    {"run", "Run an experiment end to end: apply, probe, restore, report before/after, gate CI", &setup_run},
    {"results", "List stored runs and show one's report (results list / results show RUN)", &setup_results},
    {"compare", "Compare two stored runs of the same experiment (another machine, kernel or version)", &setup_compare},
    {"validate", "Check an experiment file without touching the machine", &setup_validate},
    {"plan", "Show the trials an experiment expands to, with equivalent tc/sysctl commands", &setup_plan},
    {"link", "Put link conditions on one device, show them, clear them (netlink, no tc)", &setup_link},
    {"doctor", "Check what this machine's kernel and tools support (changes nothing)", &setup_doctor},
    {"lab", "Build an experiment's namespace lab and keep it for debugging (lab up FILE / lab down RUN)", &setup_lab},
    {"restore", "Give the machine back after a killed run, from its journal in /run/wanlab", &setup_restore},
    {"probe",
     "Measure once across a bare two-namespace lab: throughput, rtt, rr, http (built in or iperf3/ping/wrk/hping3)",
     &setup_probe},
    {"profiles", "List the named link and tuning profiles (yours first), or show one in full", &setup_profiles},
    {"vm", "Run commands in a throwaway micro-VM with a stock kernel (real netem anywhere)", &setup_vm},
};
}  // namespace

std::span<const Command> commands() { return kCommands; }

namespace {
std::vector<std::string>& dashdash() {
    static std::vector<std::string> args;
    return args;
}
}  // namespace

const std::vector<std::string>& command_after_dashdash() { return dashdash(); }
void set_command_after_dashdash(std::vector<std::string> args) { dashdash() = std::move(args); }

}  // namespace wanlab::cli
