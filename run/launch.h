// Where a run happens and how it starts: on this machine (a namespace lab, host mode, or
// the controller of hosts mode), or inside the micro-VM when this kernel lacks a qdisc the
// experiment needs; in the foreground or detached from the terminal.
//
// Contract: choose_place() decides from the experiment, the flags and what this machine
// has (ThisMachine, asked only when the answer matters), changing nothing; it throws
// InputError (exit 2) for a contradiction and wanlab::Error (exit 2) when the run cannot
// happen anywhere it may. measure_here() and measure_in_vm() run the whole measurement and
// leave the run recorded in OUT/results.db, whatever happened; the report is the caller's.
// detach() forks once (core/process.h). Not thread-safe.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "experiment/experiment.h"
#include "results/model.h"
#include "run/runner.h"

namespace wanlab::run {

/// What `wanlab run` was asked, as its flags say it.
struct RunRequest {
    std::string file;  ///< the experiment file as given
    std::string out = "wanlab-results";
    std::vector<std::string> sets;  ///< --set KEY=VALUE
    std::string run_id;             ///< --run ("" = a fresh one)
    std::string shard;              ///< --shard K/N
    bool vm = false, no_vm = false;
    bool quiet = false;
    bool restore = false;  ///< --restore: undo stale journals first
    bool force = false;
    bool allow_ssh_commands = false;  ///< --allow-ssh-commands (hosts mode)
    unsigned auto_restore_s = 0;      ///< --auto-restore SECONDS (0: no watchdog)
    std::string html;                 ///< --html FILE ("" = none)
    std::string where;                ///< --where (set for the run inside the micro-VM)
    std::string host_env;             ///< --host-env FILE (set for the run inside the micro-VM)
    bool inner = false;               ///< the run inside the micro-VM: measure and record only
};

enum class Place {
    here,      ///< this machine: a namespace lab, its own interface, or the controller of hosts
    micro_vm,  ///< the micro-VM, running this binary with --inner
};

/// What choose_place() asks of this machine.
struct ThisMachine {
    std::function<void()> require_capabilities;                ///< throws without root
    std::function<std::vector<std::string>()> missing_qdiscs;  ///< qdiscs the experiment needs and the kernel lacks
    std::function<bool()> has_root;                            ///< CAP_NET_ADMIN and CAP_SYS_ADMIN
};
/// The real machine's answers (lab/capabilities.h).
ThisMachine this_machine(const experiment::Experiment& exp);

struct PlaceChoice {
    Place place = Place::here;
    std::string notice;  ///< a line for the user when the run moves to the micro-VM ("" = none)
};

/// Where `exp` runs given --vm / --no-vm: the micro-VM when asked, or when the lab is wanlab's
/// own namespaces and this kernel lacks a qdisc or there is no root (the VM is the isolation
/// and needs none); here otherwise. Host and hosts mode never run in the VM (they impair real
/// interfaces) and need root here.
PlaceChoice choose_place(const experiment::Experiment& exp, const RunRequest& r, const ThisMachine& machine);

/// The run on this machine, recorded into r.out/results.db (created); `before` continues a
/// recorded run (resume.h admitted it). `on_trial` as RunnerOptions::on_trial. A run that
/// did not complete says so, and how to continue it, on stderr.
Outcome measure_here(const RunRequest& r, const experiment::Experiment& exp, const std::string& text,
                     const results::RunData* before,
                     const std::function<void(const results::RunData&)>& on_trial = nullptr);

/// The run inside the micro-VM (this binary with --no-vm --inner), which records into
/// r.out/results.db through a share; r.html, if any, follows its page as it refreshes. A run
/// the VM left "running" (it was killed) is recorded interrupted or failed here. `exit_code`
/// is the VM's (at least 1 after a timeout or running out of memory). Interrupted before the
/// VM recorded anything: `recorded` is false (its own message said why).
Outcome measure_in_vm(const RunRequest& r, const results::RunData* before);

/// --detach: the rest of the run goes on in a child process of its own session (no terminal
/// to lose), its output in OUT/wanlab-RUN.log. Returns 0 in that child, and in this process
/// the child's pid after saying where to follow it on stderr.
pid_t detach(const RunRequest& r, const std::string& id);

}  // namespace wanlab::run
