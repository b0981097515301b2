// The `wanlab` front end's sub-command table (after ninja's kTools).
//
// Contract: each sub-command is one entry of kCommands: a name, a one-line summary, and a
// setup function that declares the sub-command's options on a CLI11 App and returns the
// function that runs it once the command line is parsed. Runners return the process exit
// status: 0 success, 1 a runtime failure, 2 bad input (usage, experiment file), 3 an
// [[assert]] failed, 124 a timeout, 130 interrupted. They throw wanlab::Error (see error.h)
// for failures; main() is the one place that maps exceptions to exit codes.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace wanlab::cli {

using Runner = std::function<int()>;

struct Command {
    const char* name;
    const char* summary;
    Runner (*setup)(CLI::App& sub);
};

/// The arguments after the first `--`, exactly as given (main() records them before CLI11
/// parses, which would rewrite arguments such as "[root]"). Empty when there is no `--`.
const std::vector<std::string>& command_after_dashdash();
void set_command_after_dashdash(std::vector<std::string> args);

/// All sub-commands, in the order `wanlab --help` lists them.
std::span<const Command> commands();

// One setup function per sub-command, each in its own cmd_*.cpp.
Runner setup_validate(CLI::App& sub);
Runner setup_plan(CLI::App& sub);
Runner setup_link(CLI::App& sub);
Runner setup_doctor(CLI::App& sub);
Runner setup_lab(CLI::App& sub);       // cli/cmd_lab.cpp
Runner setup_restore(CLI::App& sub);   // cli/cmd_restore.cpp
Runner setup_vm(CLI::App& sub);        // cli/cmd_vm.cpp
Runner setup_probe(CLI::App& sub);     // cli/cmd_probe.cpp
Runner setup_profiles(CLI::App& sub);  // cli/cmd_profiles.cpp
Runner setup_run(CLI::App& sub);       // cli/cmd_run.cpp
Runner setup_results(CLI::App& sub);   // cli/cmd_results.cpp
Runner setup_compare(CLI::App& sub);   // cli/cmd_results.cpp

}  // namespace wanlab::cli
