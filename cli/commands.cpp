#include "cli/command.h"

#include <algorithm>

#include "core/version.h"

namespace wanlab::cli {

namespace {
constexpr Command kCommands[] = {
    {"run", "Run an experiment end to end: apply, probe, restore, report before/after, gate CI", &setup_run},
    {"results", "Stored runs: list them, show one's report, merge them, a trial's sysctls as sysctl.d", &setup_results},
    {"compare", "Compare two stored runs of the same experiment (another machine, kernel or version)", &setup_compare},
    {"validate", "Check an experiment file without touching the machine", &setup_validate},
    {"plan", "Show the trials an experiment expands to, with equivalent tc/sysctl commands", &setup_plan},
    {"link", "Put link conditions on one device, show them, clear them (netlink, no tc)", &setup_link},
    {"doctor", "Check what this machine's kernel and tools support (changes nothing)", &setup_doctor},
    {"lab", "Build an experiment's namespace lab and keep it for debugging (lab up FILE / lab down RUN)", &setup_lab},
    {"shell", "Run a shell or your own command in one trial's lab, on the emulated path (shell FILE -- CMD)",
     &setup_shell},
    {"restore", "Give the machine back after a killed run, from its journal in /run/wanlab", &setup_restore},
    {"probe",
     "Measure once across a bare two-namespace lab: throughput, udp, rtt, rr, http, transfer (built in or "
     "iperf3/ping/wrk/hping3/curl)",
     &setup_probe},
    {"profiles", "List the named link and tuning profiles (yours first), or show one in full", &setup_profiles},
    {"vm", "Run commands in a throwaway micro-VM with a stock kernel (real netem anywhere)", &setup_vm},
    {"agent", "One machine's part of a run across machines, driven over ssh by the wanlab that runs it", &setup_agent},
    {"completion", "Print the bash or zsh completion script (installed by cmake --install)", &setup_completion, true},
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
        "Examples:\n"
        "  wanlab validate examples/buffer-sweep.toml\n"
        "  wanlab plan examples/buffer-sweep.toml --set run.repeats=1\n"
        "  wanlab plan examples/buffer-sweep.toml --json\n"
        "Run `wanlab COMMAND --help` for a command's options. Exit status: 0 ok, 1 failure,\n"
        "2 bad input, 3 an [[assert]] failed, 130 interrupted.");
    app->require_subcommand(1);
    app->fallthrough(false);
    for (const auto& cmd : commands()) {
        CLI::App* sub = app->add_subcommand(cmd.name, cmd.summary);
        if (cmd.hidden) sub->group("");
        runners[sub] = cmd.setup(*sub);
    }
    return app;
}

CLI::Option* add_key_option(CLI::App& app, const std::string& key, const std::string& help,
                            std::function<void(const std::string&)> set) {
    std::string dashed = key;
    std::replace(dashed.begin(), dashed.end(), '_', '-');
    CLI::Option* option = app.add_option_function<std::string>("--" + dashed, set, help);
    if (dashed != key) app.add_option_function<std::string>("--" + key, set, "Alias of --" + dashed)->group("");
    return option;
}

const std::vector<std::string>& command_after_dashdash() { return dashdash(); }
void set_command_after_dashdash(std::vector<std::string> args) { dashdash() = std::move(args); }

}  // namespace wanlab::cli
