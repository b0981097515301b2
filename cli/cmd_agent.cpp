// `wanlab agent`: one machine's part of a run across machines ([lab] mode = "hosts"), driven
// by the controller over its stdin and stdout (remote/agent.h). Started by the controller
// (through ssh, or directly for ssh = "local"); not for people to type, but safe to: it
// changes nothing before the controller's `begin`, and gives everything back when its input
// ends.
#include <unistd.h>

#include "cli/command.h"
#include "lab/capabilities.h"
#include "remote/agent.h"

namespace wanlab::cli {

Runner setup_agent(CLI::App& sub) {
    sub.footer(
        "Speaks line-delimited JSON on stdin and stdout with the wanlab that started it (docs/remote.md).\n"
        "It gives its machine back when its input ends, when `end` comes, when no request came for its\n"
        "lease (30 s), on SIGTERM/SIGHUP/SIGINT, or (if killed) through its watchdog; `wanlab restore`\n"
        "on this machine finds its journal otherwise.");
    return [] {
        lab::require_capabilities("wanlab agent");
        return remote::serve(STDIN_FILENO, STDOUT_FILENO, {});
    };
}

}  // namespace wanlab::cli
