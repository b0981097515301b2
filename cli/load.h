// Shared by the sub-commands that read an experiment file: read it, load it, print every
// diagnostic to stderr. Throws InputError (exit 2) when the file cannot be read or has errors.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "experiment/experiment.h"
#include "lab/session.h"

namespace wanlab::cli {

/// Where examples are found by name, in this order: $WANLAB_EXAMPLES, then the shipped ones
/// (core/shipped.h: the source tree's examples/ for a build, share/wanlab/examples once
/// installed; share/doc/wanlab/examples points there).
std::vector<std::string> example_dirs();

/// The names of the examples in example_dirs() (NAME of NAME.toml), sorted, each once.
std::vector<std::string> example_names();

/// The experiment file `arg` stands for: `arg` itself when a file of that name exists or it
/// is a path (it holds a '/'); otherwise the example of that name (`buffer-sweep` or
/// `buffer-sweep.toml`), with a note on stderr saying which file it took. Throws InputError,
/// naming the examples there are, when it is neither.
std::string experiment_path(const std::string& arg);

/// `text`, when given, receives the file's text as read.
experiment::Experiment load_or_throw(const std::string& path, const std::vector<std::string>& sets,
                                     std::string* text = nullptr);

/// Throws wanlab::Error (exit 2) when this kernel lacks a qdisc the experiment's link
/// conditions need, with the fix and `advice`: what the command can do instead.
void refuse_missing_qdiscs(const experiment::Experiment& exp, const std::string& file, const std::string& advice);

/// This very command line again in the micro-VM, with `--no-vm` before any `--` (so the guest
/// refuses rather than moving again): the same working folder, its output on this terminal,
/// its exit status (130 on Ctrl-C). Says `why` first. Its input is empty, unless `terminal`:
/// then the command has this terminal in the VM (vm::VmOptions::terminal).
int rerun_in_vm(const std::string& why, bool terminal = false);
/// `argv` (from this wanlab's own path on) in the micro-VM, as rerun_in_vm() runs its line;
/// `out_dir`, if given, is shared writable at the same path (vm::VmOptions::out_dir).
int run_in_vm(const std::string& why, const std::vector<std::string>& argv, bool terminal,
              const std::string& out_dir = "");
/// Whether stdin and stdout are both a terminal: a shell can be interactive there.
bool on_terminal();

/// `wanlab shell` and `lab up`: starts `trial`'s [[service]]s in `session`, working in a
/// fresh /tmp/wanlab-COMMAND-XXXXXX (kept afterwards, for their logs); returns the line to
/// print ("" when the trial has none). Throws services::ServiceFailure.
std::string start_services_for(lab::LabSession& session, const experiment::Trial& trial, const std::string& command,
                               const std::function<void()>& tick);

/// The one-trial experiment a command's link flags make: `[link]` with `profile` (if any) and
/// each key = value, then `extra` (more tables), loaded as a file would be (profiles, located
/// errors shown on stderr as that table). Throws InputError naming `what` when it has errors.
experiment::Experiment load_link_flags(const std::string& profile, const std::map<std::string, std::string>& values,
                                       const std::string& extra, const std::string& what);

/// A command-line flag's value as a TOML value, for commands that turn flags into the
/// table an experiment file would hold (link apply, probe): integers and booleans as they
/// are, anything else as a quoted string ("20ms", "1%").
std::string toml_value(const std::string& flag_value);

}  // namespace wanlab::cli
