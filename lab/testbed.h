// Testbed: where a run's trials are applied and its probes measure, behind one interface so
// the runner and `wanlab lab up` never ask which [lab] mode they are in. Two kinds:
//
//   namespaces  wanlab's own client - router - server lab (lab/topology.h); link
//               conditions on the router's two egress devices, the probes between the
//               client and server namespaces.
//   host        one real interface of this machine toward one target (netem/host.h); the
//               probes run here against the target's own servers.
//
// Contract: LabSession makes the testbed once its checks have passed and its journal exists
// (check_testbed() and testbed_locks() run before that, changing nothing; unverifiable() is
// pure), sets each trial's
// sysctls between prepare() and apply_link(), and destroys the testbed after the sysctls are
// restored. Creates (namespaces): the topology, then on the first apply_link() the router's
// qdisc snapshots, journaled before their first change; (host) the interface's undo plan,
// journaled before its first change. Undoes: everything, in the destructor, which never
// throws: a failed host restore is logged and keeps the journal for `wanlab restore`.
// Not thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "experiment/experiment.h"
#include "lab/restore.h"
#include "lab/topology.h"
#include "probes/probe.h"
#include "services/service.h"
#include "sysctl/proc_sys.h"
#include "sysctl/validate.h"

namespace wanlab::lab {

class Journal;

/// A lab host's interface on the path, where a capture watches (diagnosis/capture.h).
struct CapturePoint {
    std::string host;   ///< "client", "server", or "host" (host mode: this machine)
    std::string netns;  ///< "" = wanlab's own
    std::string dev;
    std::string filter;  ///< a pcap filter keeping the lab's packets only ("" = all: the device is the lab's)
};

class Testbed {
public:
    virtual ~Testbed() = default;

    /// Rebuilds what `lab` changes before the trial's sysctls are set (a namespace lab whose
    /// mtu, offloads or queue length differ is built again under the same names).
    virtual void prepare(const experiment::LabSpec& lab) = 0;
    /// Puts `trial`'s link conditions in place by replace, read back and verified; a
    /// direction without conditions gets what it had before the run.
    virtual void apply_link(const experiment::Trial& trial) = 0;
    /// The probes' client and server over `family`: AF_INET, AF_INET6, or AF_UNSPEC for the
    /// lab's first (IPv4 unless the lab has IPv6 only). In host and hosts mode the addresses are
    /// the target's and the machines', whatever `family` (the loader checked they agree); a
    /// namespace lab without that family throws wanlab::Error.
    virtual probes::Endpoints endpoints(int family) const = 0;
    /// The endpoints of one measurement of `spec`, given where it would measure (endpoints()
    /// with its `server_port` applied): the same, except in hosts mode, where a built-in
    /// probe's own server is started on the server machine for it (Endpoint::far, stopped by
    /// the probe or when the last copy of `where` goes).
    virtual probes::Endpoints measure(const probes::ProbeSpec&, probes::Endpoints where) const { return where; }
    /// Runs one measurement of `spec` at `where` (measure()'s): here, or in hosts mode with a
    /// client machine other than this one, there, through its agent. Throws as Probe::run().
    virtual probes::ProbeResult run_probe(const probes::ProbeSpec& spec, const probes::Endpoints& where,
                                          const probes::Tick& tick) const {
        return probes::make_probe(spec)->run(where, tick);
    }
    /// Whether the probes' client runs on this machine (its counters and CPU are then the
    /// client's; otherwise machine_counters() has the client's).
    virtual bool probes_here() const { return true; }
    /// Kernel counters of the lab's machines other than this one, read now, by role
    /// ({"server": {"counters": {...}, "cpu": [[busy, total], ...]}}); none but in hosts mode.
    virtual nlohmann::json machine_counters() const { return nlohmann::json::object(); }
    /// Where `trial`'s link conditions sit, one site per impaired direction (their
    /// statistics: diagnosis/qdisc_watch.h).
    virtual std::vector<netem::QdiscSite> qdisc_sites(const experiment::Trial& trial) const = 0;
    /// Where captures watch, one point per lab host the probes run on.
    virtual std::vector<CapturePoint> capture_points() const = 0;
    /// Where a [[service]] on lab host `host` (LabSpec::hosts()) runs.
    virtual services::Placement placement(const std::string& host) const = 0;
    /// What `wanlab lab up` shows once `trial` is applied: the pieces, then a command to try.
    virtual std::string describe(const experiment::Trial& trial) const = 0;
    /// What the undo does, for `wanlab lab up`'s last line: "tearing down run RUN".
    virtual std::string undo_text() const = 0;
};

/// Everything the testbed for `trials` can check before anything changes (host mode: the
/// device exists, no SSH session it, or a device stacked on it, carries and the filter would
/// cut off, no sysctl of `changes` in this machine's own namespace that could cut an SSH
/// session (read against its value now through `proc`), each unless `force`; the ifb
/// module's state). Throws InputError naming what to do.
void check_testbed(const std::vector<experiment::Trial>& trials, const std::vector<sysctl::Change>& changes,
                   sysctl::ProcSys& proc, bool force);

/// Why, on the testbed of `lab`, a measured RTT and rate cannot be compared with the
/// configured ones, or "" when they can (the emulation check runs only then).
std::string unverifiable(const experiment::LabSpec& lab);

/// A lock the run holds while its testbed exists, besides the sysctl locks.
struct TestbedLock {
    std::string file;  ///< in the journal directory
    std::string what;  ///< for the "held by another run" message
};
std::vector<TestbedLock> testbed_locks(const experiment::LabSpec& lab);

/// The testbed of `trials` (all share their [lab] mode): nothing of a trial is applied yet.
std::unique_ptr<Testbed> make_testbed(const std::vector<experiment::Trial>& trials, const std::string& run,
                                      Journal& journal, sysctl::ProcSys& proc, const Progress& progress,
                                      const Log& log);

}  // namespace wanlab::lab
