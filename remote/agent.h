// `wanlab agent`: the part of a run that happens on one machine of [lab] mode = "hosts",
// driven by the controller over ssh in line-delimited JSON (remote/protocol.md in
// docs/remote.md), and the host restoring itself.
//
// Contract: serve() first writes its hello, {"agent":"wanlab","version":...,"protocol":N,
// "host":...}, then answers each request line with one line. Before the controller's `begin`
// it changes nothing. `begin` takes the journal directory's lock, refuses (or with
// "restore": true, restores) stale journals as a run does, opens the run's journal and arms
// the watchdog (lab/watchdog.h) with the run's deadline: it restores the host if the agent is
// killed, and ends the agent (which then restores) at the deadline. Every change after that
// is journaled before it is made: sysctls (validated against this kernel first), services
// (their process groups). The host is given back, in reverse, on `end`, on EOF of its input
// (the controller or its ssh connection is gone), when no request came for the lease (the
// controller's machine stopped answering: no FIN ever comes), on SIGTERM, SIGINT or SIGHUP;
// then the journal is removed. What cannot be undone keeps the journal for `wanlab restore`
// on this host. Requests are served one at a time; not thread-safe.
#pragma once

#include <filesystem>

#include "lab/journal.h"

namespace wanlab::remote {

/// The protocol's version: a controller refuses an agent that speaks another.
inline constexpr int kProtocol = 1;

struct AgentOptions {
    std::filesystem::path dir = lab::kRunDir;  ///< journals and locks on this host
};

/// Serves one controller on `in` and `out` until the host is given back; returns the exit
/// status (0 after `end` or EOF, 1 when the lease ran out or the host could not be given back
/// whole).
int serve(int in, int out, const AgentOptions& options);

}  // namespace wanlab::remote
