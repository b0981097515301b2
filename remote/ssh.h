// How wanlab reaches another machine: OpenSSH, as the user already uses it (their keys,
// agent, config and jump hosts), with one multiplexed connection per host for a whole run.
//
// Contract: pure. agent_argv() builds the command line that starts `wanlab agent` on a host:
// for "local", that program itself; else ssh with the options below and the remote command
// as ONE string in which every word is quoted for the remote shell (ssh joins its remaining
// arguments with spaces and hands them to the login shell, so an unquoted word with a space,
// quote, `$(...)` or `;` would be split or run). The first connection to a host becomes the
// master of a ControlPath in a private folder; later ones (`wanlab restore` over the same
// connection) reuse it; it ends with the agent (ControlPersist=no). BatchMode: no password
// or host-key prompt ever waits on a terminal; the user's keys and agent do the work.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace wanlab::remote {

/// One machine of [lab] mode = "hosts", as the file names it.
struct Destination {
    std::string name;               ///< the role: client, server, router
    std::string ssh;                ///< "local", or what `ssh` takes: host, user@host, an alias of the config
    std::string ssh_config;         ///< [hosts] ssh_config: passed as -F ("" = the user's own)
    std::string wanlab = "wanlab";  ///< the program on that machine
    bool local() const { return ssh == "local"; }
};

/// The command that runs `wanlab agent` on `d`. `self` is this wanlab's own path (for a
/// local host whose `wanlab` is the default); `control_dir` holds the ControlPath socket.
std::vector<std::string> agent_argv(const Destination& d, const std::filesystem::path& control_dir,
                                    const std::string& self);

/// The words as one string a POSIX shell reads back as exactly those words.
std::string remote_command(const std::vector<std::string>& words);

}  // namespace wanlab::remote
