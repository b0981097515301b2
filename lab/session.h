// LabSession: one run of the lab on this machine, from the safety checks to the last undo.
//
// Creates, in order: (after checking every trial's sysctls against the kernel and, under the
// lock <dir>/lock, that no stale journal is left) the run's journal, a lock per global
// sysctl any trial will change (two runs never change the same global key at once; runs on
// separate labs proceed together), the Topology; then, per apply_trial(), the trial's
// sysctls (global ones on the host, per-host ones in each namespace) and its link
// conditions on the router's two egress devices. Undoes: everything in reverse by member
// destruction order, and finally removes the journal. The router devices' qdisc trees are
// journaled (snapshot) before their first change like everything else, although deleting
// the router namespace, which restore does next, takes them along. A SIGKILL leaves the
// journal for `wanlab restore`.
//
// Host mode ([lab] mode = "host") builds no namespaces: after the same checks, and after
// refusing an interface that carries an SSH session the target filter does not spare
// (unless options.force), it holds a lock on the interface, journals the interface's
// netem::HostUndo, and apply_trial() impairs only the target's traffic on it (netem/host.h).
// The host's sysctls are set in wanlab's own namespace. An undo that fails keeps the
// journal for `wanlab restore`. Not thread-safe.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "experiment/experiment.h"
#include "lab/journal.h"
#include "lab/restore.h"
#include "lab/topology.h"
#include "netem/device.h"
#include "netem/host.h"
#include "netem/kernel.h"
#include "sysctl/proc_sys.h"
#include "sysctl/snapshot.h"
#include "sysctl/validate.h"

namespace wanlab::lab {

struct SessionOptions {
    std::string run;                      ///< run id: [a-z0-9-], at most 24 characters
    bool restore_stale = false;           ///< --restore: undo stale journals instead of refusing
    std::filesystem::path dir = kRunDir;  ///< journals and locks
    Progress progress;                    ///< after "journal", "namespaces", "links", "sysctls"
    Log log;                              ///< restore messages
    bool force = false;                   ///< host mode: impair an interface carrying an SSH session
};

/// A fresh run id: 8 hex digits.
std::string new_run_id();
/// Throws InputError unless `run` is a usable run id.
void check_run_id(const std::string& run);

/// The trial's sysctls as changes, in the namespaces of run `names` (host mode's "host" is
/// wanlab's own namespace).
std::vector<sysctl::Change> sysctl_changes(const Trial& trial, const LabNames& names);

class LabSession {
public:
    /// The lab for `trials` (all of a run's, checked and locked up front); nothing of any
    /// trial is applied until apply_trial(). Every trial must have the same [lab] section.
    LabSession(const std::vector<Trial>& trials, const SessionOptions& options, sysctl::ProcSys& proc);
    /// `wanlab lab up`: the lab with `trial` applied.
    LabSession(const Trial& trial, const SessionOptions& options, sysctl::ProcSys& proc);
    ~LabSession();
    LabSession(const LabSession&) = delete;
    LabSession& operator=(const LabSession&) = delete;

    /// Moves the lab to `trial`'s configuration: the lab built again if the trial's mtu,
    /// offloads or queue length differ from the lab's; its sysctls (keys an earlier trial set and
    /// this one does not go back to their values from before the run), then its link
    /// conditions, `up` on the router's wl-rs and `down` on wl-rc, by replace (never delete
    /// then add), read back and verified; a direction without conditions gets the kernel's
    /// default qdisc back. Reports the stage "qdiscs" through options.progress.
    void apply_trial(const Trial& trial);

    /// The namespace lab; host mode has none (throws wanlab::Error).
    const Topology& topology() const;
    const Journal& journal() const { return *journal_; }

private:
    SessionOptions options_;
    sysctl::ProcSys* proc_;
    std::optional<Journal> journal_;
    std::vector<FileLock> locks_;
    LabSpec built_;  ///< the [lab] the topology was built with
    std::optional<Topology> topology_;
    std::optional<sysctl::SysctlSnapshot> sysctls_;
    std::optional<netem::NetlinkKernel> router_;
    std::optional<netem::DeviceQdiscs> up_, down_;
    // Host mode; destroyed first.
    std::optional<netem::NetlinkKernel> host_kernel_;
    std::optional<netem::HostImpairment> host_;
};

}  // namespace wanlab::lab
