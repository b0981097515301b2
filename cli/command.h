// The `wanlab` front end's sub-command table (after ninja's kTools).
//
// Contract: each sub-command is one entry of kCommands: a name, a one-line summary, and a
// setup function that declares the sub-command's options on a CLI11 App and returns the
// function that runs it once the command line is parsed. Runners return the process exit
// status: 0 success, 1 a runtime failure, 2 bad input (usage, experiment file), 3 an
// [[assert]] failed, 124 a timeout, 130 interrupted. They throw wanlab::Error (see error.h)
// for failures; main() is the one place that maps exceptions to exit codes.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
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
    /// Lines of `wanlab CMD --help`'s examples, each a whole command line (setup may replace
    /// the footer with a longer one of its own).
    const char* examples = "";
    bool hidden = false;  ///< left out of --help (tooling such as `completion`)
};

/// The arguments after the first `--`, exactly as given (main() records them before CLI11
/// parses, which would rewrite arguments such as "[root]"). Empty when there is no `--`.
const std::vector<std::string>& command_after_dashdash();
void set_command_after_dashdash(std::vector<std::string> args);
/// The whole command line as given (argv[1] on), for a command that runs itself again in the
/// micro-VM.
const std::vector<std::string>& command_line();
void set_command_line(std::vector<std::string> args);

/// All sub-commands, in the order `wanlab --help` lists them.
std::span<const Command> commands();

/// The `wanlab` command line: every entry of commands() declared on it; `runners` gets the
/// runner of each sub-command.
std::unique_ptr<CLI::App> make_app(std::map<CLI::App*, Runner>& runners);

/// `wanlab help [WORD...]`, and what bare `wanlab` prints: the help of the command the words
/// name (`help results show`, `help probe http`: that kind's options only), else the command
/// list. Throws InputError naming an unknown word, with the closest one.
std::string help_for(const CLI::App& app, const std::vector<std::string>& words);

/// `wanlab probe KIND --help`: the kind's own options, its metrics, and the flags every kind
/// takes; "" when `kind` is not a probe kind.
std::string probe_kind_help(const std::string& kind);

/// Declares `--KEY VALUE` for a TOML key (a [link] or [[probe]] key), spelled with dashes as
/// command-line flags are (`--server-split-write`), with the key's own underscore spelling
/// kept as a hidden alias. `set` gets the value as written.
CLI::Option* add_key_option(CLI::App& app, const std::string& key, const std::string& help,
                            std::function<void(const std::string&)> set);

/// Shell completion scripts for `app`'s commands and options (`wanlab completion bash|zsh`).
std::string bash_completion(const CLI::App& app);
std::string zsh_completion(const CLI::App& app);
/// What `wanlab completion words WHAT` lists when tab is pressed: "runs" (ids in
/// `results`/results.db, newest first, after "latest"), "profiles" or "examples" (names).
std::vector<std::string> completion_words(const std::string& what, const std::filesystem::path& results);

// One setup function per sub-command, each in its own cmd_*.cpp.
Runner setup_validate(CLI::App& sub);
Runner setup_plan(CLI::App& sub);
Runner setup_link(CLI::App& sub);
Runner setup_doctor(CLI::App& sub);
Runner setup_lab(CLI::App& sub);         // cli/cmd_lab.cpp
Runner setup_restore(CLI::App& sub);     // cli/cmd_restore.cpp
Runner setup_agent(CLI::App& sub);       // cli/cmd_agent.cpp
Runner setup_shell(CLI::App& sub);       // cli/cmd_shell.cpp
Runner setup_vm(CLI::App& sub);          // cli/cmd_vm.cpp
Runner setup_probe(CLI::App& sub);       // cli/cmd_probe.cpp
Runner setup_profiles(CLI::App& sub);    // cli/cmd_profiles.cpp
Runner setup_run(CLI::App& sub);         // cli/cmd_run.cpp
Runner setup_tune(CLI::App& sub);        // cli/cmd_tune.cpp
Runner setup_results(CLI::App& sub);     // cli/cmd_results.cpp
Runner setup_compare(CLI::App& sub);     // cli/cmd_results.cpp
Runner setup_completion(CLI::App& sub);  // cli/completion.cpp
Runner setup_help(CLI::App& sub);        // cli/commands.cpp

}  // namespace wanlab::cli
