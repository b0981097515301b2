// wanlab: the thin front end. Picks a sub-command from the table in commands.cpp, parses
// its options with CLI11 and maps every failure to an exit status in one place.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <exception>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "core/diagnostic.h"
#include "core/error.h"
#include "core/version.h"

int main(int argc, char** argv) {
    // A reader that goes away (`| head`, a tee killed with the SSH session) must not kill
    // wanlab while it holds the machine's network: writes fail with EPIPE instead, and the
    // run still gives everything back. Tools wanlab starts get the default back (ToolProcess).
    ::signal(SIGPIPE, SIG_IGN);
    CLI::App app{
        "wanlab: emulate WAN links, sweep kernel network settings, measure the difference.\n"
        "Experiments are TOML files; see docs/experiment-format.md.",
        "wanlab"};
    app.set_version_flag("--version", std::string("wanlab ") + wanlab::kVersion);
    app.footer(
        "Examples:\n"
        "  wanlab validate examples/buffer-sweep.toml\n"
        "  wanlab plan examples/buffer-sweep.toml --set run.repeats=1\n"
        "  wanlab plan examples/buffer-sweep.toml --json\n"
        "Run `wanlab COMMAND --help` for a command's options. Exit status: 0 ok, 1 failure,\n"
        "2 bad input, 3 an [[assert]] failed, 130 interrupted.");
    app.require_subcommand(1);
    app.fallthrough(false);
    std::map<CLI::App*, wanlab::cli::Runner> runners;
    for (const auto& cmd : wanlab::cli::commands()) {
        CLI::App* sub = app.add_subcommand(cmd.name, cmd.summary);
        runners[sub] = cmd.setup(*sub);
    }
    std::vector<std::string> names;
    for (const auto& cmd : wanlab::cli::commands()) names.emplace_back(cmd.name);
    if (argc > 1 && argv[1][0] != '-' && std::find(names.begin(), names.end(), argv[1]) == names.end()) {
        auto guess = wanlab::did_you_mean(argv[1], names);
        std::fputs(fmt::format("wanlab: unknown command `{}`{}; run `wanlab --help` for the list\n", argv[1],
                               guess.empty() ? "" : fmt::format(" (did you mean `{}`?)", guess))
                       .c_str(),
                   stderr);
        return 2;
    }
    for (int i = 1; i < argc; ++i)
        if (std::string(argv[i]) == "--") {
            wanlab::cli::set_command_after_dashdash(std::vector<std::string>(argv + i + 1, argv + argc));
            break;
        }
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        int code = app.exit(e);
        return code == 0 ? 0 : 2;
    }
    try {
        for (auto& [sub, run] : runners)
            if (sub->parsed()) return run();
        return 2;
    } catch (const wanlab::Error& e) {
        std::fputs(fmt::format("wanlab: error: {}\n", e.what()).c_str(), stderr);
        return e.exit_code();
    } catch (const std::exception& e) {
        std::fputs(fmt::format("wanlab: internal error: {}\n", e.what()).c_str(), stderr);
        return 1;
    }
}
