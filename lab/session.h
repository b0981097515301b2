// LabSession: one run of the lab on this machine, from the safety checks to the last undo.
//
// Creates, in order: (after checking every trial's sysctls against the kernel and the
// testbed's own preconditions, and, under the lock <dir>/lock, that no stale journal is
// left) a lock per global sysctl any trial will change (two runs never change the same
// global key at once; runs on separate labs proceed together) and the testbed's locks, the
// run's journal, the Testbed ([lab] mode: the namespace lab or one host interface, see
// lab/testbed.h); then, per apply_trial(), the trial's sysctls (global ones on the host,
// per-host ones in each namespace, host mode's in wanlab's own) and its link conditions
// through the testbed; per start_services(), the trial's [[service]]s. Undoes: everything in reverse by member
// destruction order, and finally removes the journal. Every change is journaled before it is made; a SIGKILL, or an
// undo that fails, leaves the journal for `wanlab restore`. Not thread-safe.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "experiment/experiment.h"
#include "lab/journal.h"
#include "lab/restore.h"
#include "lab/testbed.h"
#include "lab/topology.h"
#include "sysctl/proc_sys.h"
#include "sysctl/snapshot.h"
#include "sysctl/validate.h"

namespace wanlab::lab {

struct SessionOptions {
    std::string run;             ///< run id: [a-z0-9-], at most 24 characters
    bool restore_stale = false;  ///< --restore: undo stale journals instead of refusing
    /// `wanlab run --resume`: the stale journal of this very run (killed) is undone first, as
    /// part of continuing it; others are still refused unless restore_stale.
    bool resume = false;
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
std::vector<sysctl::Change> sysctl_changes(const experiment::Trial& trial, const experiment::LabNames& names);

/// Session: one run's machine side, whatever its [lab] mode: what the runner asks of it
/// (LabSession on this machine; remote/hosts.h's HostsSession across machines).
class Session {
public:
    virtual ~Session() = default;
    /// Moves the lab (or the machines) to `trial`'s configuration.
    virtual void apply_trial(const experiment::Trial& trial) = 0;
    /// Starts `trial`'s [[service]]s, each ready before the next; throws
    /// services::ServiceFailure when one cannot start or get ready.
    virtual void start_services(const experiment::Trial& trial, const std::filesystem::path& dir,
                                const probes::Tick& tick) = 0;
    /// Throws services::ServiceFailure if a running service has exited.
    virtual void check_services() = 0;
    virtual void stop_services() noexcept = 0;
    /// Where the probes measure.
    virtual const Testbed& testbed() const = 0;
};

class LabSession final : public Session {
public:
    /// The lab for `trials` (all of a run's, checked and locked up front); nothing of any
    /// trial is applied until apply_trial(). Every trial must have the same [lab] section.
    LabSession(const std::vector<experiment::Trial>& trials, const SessionOptions& options, sysctl::ProcSys& proc);
    /// `wanlab lab up`: the lab with `trial` applied.
    LabSession(const experiment::Trial& trial, const SessionOptions& options, sysctl::ProcSys& proc);
    ~LabSession() override;
    LabSession(const LabSession&) = delete;
    LabSession& operator=(const LabSession&) = delete;

    /// Moves the lab to `trial`'s configuration: Testbed::prepare() (a namespace lab is built
    /// again if the trial's mtu, offloads or queue length differ), its sysctls (keys an
    /// earlier trial set and this one does not go back to their values from before the run),
    /// then its link conditions through Testbed::apply_link(): by replace (never delete then
    /// add), read back and verified. Reports the stages "sysctls" and "qdiscs" through
    /// options.progress.
    void apply_trial(const experiment::Trial& trial) override;

    /// Starts `trial`'s [[service]]s in order, after apply_trial() (so their sockets see the
    /// trial's sysctls), each journaled right after its spawn and checked ready before the
    /// next starts; `dir` is the trial's folder ({dir}: logs and rendered templates), made
    /// here. Throws services::ServiceFailure; what started stays until stop_services().
    void start_services(const experiment::Trial& trial, const std::filesystem::path& dir,
                        const probes::Tick& tick) override;
    /// Throws services::ServiceFailure if a running service has exited.
    void check_services() override;
    /// Stops the running services, newest first (apply_trial() and the destructor do too).
    void stop_services() noexcept override;
    /// The placeholder values of `trial` in this lab: {server} {client} {trial} {run} {dir}.
    std::map<std::string, std::string> placeholders(const experiment::Trial& trial,
                                                    const std::filesystem::path& dir) const;

    /// Where the trials are applied and the probes measure.
    const Testbed& testbed() const override { return *testbed_; }
    const Journal& journal() const { return *journal_; }

private:
    SessionOptions options_;
    // Creation order; destruction runs in reverse: the sysctls go back first, then the
    // testbed (qdiscs, namespaces or the host interface), then the locks and the journal.
    std::optional<Journal> journal_;
    std::vector<FileLock> locks_;
    std::unique_ptr<Testbed> testbed_;
    std::optional<sysctl::SysctlSnapshot> sysctls_;
    std::vector<std::unique_ptr<services::Service>> services_;  // stopped before everything else
};

/// PairSession: `wanlab probe`'s bare lab (lab/topology.h PairTopology), journaled as a run
/// is, so `wanlab restore` removes it after a SIGKILL.
///
/// Creates, in order: (under the lock <dir>/lock, after refusing stale journals, as a run
/// does) the journal of run `run`, then the pair's namespaces wanlab-RUN-a and -b and its
/// veth, each journaled before it is made. Undoes: the pair, then removes the journal (kept
/// if an undo failed). Not thread-safe.
class PairSession {
public:
    /// `run` is a run id (check_run_id()); throws wanlab::Error if a stale journal is left.
    PairSession(const std::string& run, const std::filesystem::path& dir = kRunDir);
    PairSession(const PairSession&) = delete;
    PairSession& operator=(const PairSession&) = delete;

    const PairTopology& pair() const { return *pair_; }
    const Journal& journal() const { return *journal_; }

private:
    // Creation order; destruction runs in reverse.
    std::optional<Journal> journal_;
    std::optional<PairTopology> pair_;
};

}  // namespace wanlab::lab
