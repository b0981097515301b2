// wanlab: the thin front end. Picks a sub-command from the table in commands.cpp, parses
// its options with CLI11 and maps every failure to an exit status in one place.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "core/diagnostic.h"
#include "core/error.h"
#include "core/text.h"

int main(int argc, char** argv) {
    // A reader that goes away (`| head`, a tee killed with the SSH session) must not kill
    // wanlab while it holds the machine's network: writes fail with EPIPE instead, and the
    // run still gives everything back. Tools wanlab starts get the default back (core/process.h).
    ::signal(SIGPIPE, SIG_IGN);
    std::map<CLI::App*, wanlab::cli::Runner> runners;
    auto app = wanlab::cli::make_app(runners);
    std::vector<std::string> names, shown;  // `completion` runs, but is never suggested
    for (const auto& cmd : wanlab::cli::commands()) {
        names.emplace_back(cmd.name);
        if (!cmd.hidden) shown.emplace_back(cmd.name);
    }
    // Bare `wanlab`: the command list, not "a subcommand is required".
    if (argc == 1) {
        std::fputs(app->help().c_str(), stdout);
        return 0;
    }
    // `wanlab probe KIND --help`: that kind's options only.
    if (argc > 2 && std::string(argv[1]) == "probe")
        for (int i = 3; i < argc; ++i)
            if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") {
                if (auto h = wanlab::cli::probe_kind_help(argv[2]); !h.empty()) {
                    std::fputs(h.c_str(), stdout);
                    return 0;
                }
            }
    if (argc > 1 && argv[1][0] != '-' && std::find(names.begin(), names.end(), argv[1]) == names.end()) {
        auto guess = wanlab::did_you_mean(argv[1], shown);
        std::fputs(fmt::format("wanlab: unknown command `{}`{}; run `wanlab help` for the list\n", argv[1],
                               guess.empty() ? "" : fmt::format(" (did you mean `{}`?)", guess))
                       .c_str(),
                   stderr);
        return 2;
    }
    wanlab::cli::set_command_line(std::vector<std::string>(argv + 1, argv + argc));
    for (int i = 1; i < argc; ++i)
        if (std::string(argv[i]) == "--") {
            wanlab::cli::set_command_after_dashdash(std::vector<std::string>(argv + i + 1, argv + argc));
            break;
        }
    try {
        app->parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        int code = app->exit(e);
        return code == 0 ? 0 : 2;
    }
    try {
        for (auto& [sub, run] : runners)
            if (sub->parsed()) return run();
        return 2;
    } catch (const wanlab::Error& e) {
        // An error may quote what another program, machine or file said: never raw to a terminal.
        std::fputs(fmt::format("wanlab: error: {}\n", wanlab::text::terminal_safe(e.what())).c_str(), stderr);
        return e.exit_code();
    } catch (const std::filesystem::filesystem_error& e) {
        // A full disk or a folder that cannot be written is the machine's state, not a bug.
        std::fputs(fmt::format("wanlab: error: {}\n", wanlab::text::terminal_safe(e.what())).c_str(), stderr);
        return 1;
    } catch (const std::exception& e) {
        std::fputs(fmt::format("wanlab: internal error: {}\n", wanlab::text::terminal_safe(e.what())).c_str(), stderr);
        return 1;
    }
}
