// The emulated link's own evidence: each direction's qdiscs (netem, the shaper, the bottleneck
// queue) as the kernel counts them while a measurement runs: packets and bytes sent, drops,
// overlimits, requeues, and the queue's length at its peak.
//
// Contract: QdiscTally is pure: it takes dumps (netem/kernel.h TcObject with TCA_STATS2) and
// their times and turns them into counters and series. A qdisc is named by its role in
// wanlab's tree (the layout's handles): "netem", "shaper", "queue". Counters, per direction
// and role ("up.netem.drops"): sent_packets, sent_bytes, drops, overlimits, requeues (deltas
// over the measurement), qlen_peak and backlog_peak (the largest seen), limit (netem and
// pfifo: packets; bfifo: limit_bytes) as configured in the kernel. A parent counts its
// child's drops too (netem counts what its shaper drops, the shaper what its queue drops):
// the rules subtract. Series per direction and role: "qdisc.up.netem.backlog" (bytes) and
// "qdisc.up.netem.drops" (per sample), and "qdisc.up.netem.throughput": bit/s that left
// netem, the top of wanlab's tree, between samples: what the emulated link delivered. QdiscWatch samples from its own
// thread every `interval` and fails soft: a site whose dump fails stops contributing, the measurement goes on.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "netem/encode.h"
#include "netem/kernel.h"
#include "probes/series.h"

namespace wanlab::diagnosis {

using netem::QdiscSite;

/// How often a run reads the link's qdiscs during a measurement: often enough to see a
/// queue's peak within a round trip or two, rarely enough to cost nothing (one netlink dump).
inline constexpr std::chrono::milliseconds kQdiscSampleEvery{100};

class QdiscTally {
public:
    explicit QdiscTally(std::vector<QdiscSite> sites);
    /// One dump of site `i` taken `t` seconds after the start.
    void add(std::size_t i, double t, const std::vector<netem::TcObject>& qdiscs);
    /// The counters and, into `series`, the series (see the header comment).
    nlohmann::json counters() const;
    void add_series(probes::SeriesMap& series) const;

private:
    struct Role {
        netem::TcStats first, last;
        std::uint32_t qlen_peak = 0, backlog_peak = 0;
        double limit = -1;
        bool limit_in_bytes = false;
        double last_t = 0;
        probes::Series backlog, drops;
        probes::Series sent;  ///< bit/s between samples (netem's: what leaves the link)
        /// netem's drops as a share of the packets it dropped or sent between samples: the
        /// link's loss as it happened, its loss model's and its limit's (and an outage's) alike.
        probes::Series lost;
    };
    std::vector<QdiscSite> sites_;
    std::vector<std::map<std::string, Role>> roles_;  // per site, by role
};

/// QdiscWatch: a thread that dumps each site's qdiscs every `interval` into a QdiscTally.
/// Creates: one netlink socket per site (in its namespace) and the thread. Undoes: stops and
/// joins the thread, then closes the sockets; finish() does the same and returns the tally.
class QdiscWatch {
public:
    QdiscWatch(std::vector<QdiscSite> sites, std::chrono::milliseconds interval);
    ~QdiscWatch();
    QdiscWatch(const QdiscWatch&) = delete;
    QdiscWatch& operator=(const QdiscWatch&) = delete;

    /// Takes a last sample, stops, and returns what was seen.
    const QdiscTally& finish();

private:
    void sample();
    void loop();
    void stop();

    std::vector<QdiscSite> sites_;
    std::chrono::milliseconds interval_;
    QdiscTally tally_;
    std::vector<std::unique_ptr<netem::NetlinkKernel>> kernels_;  // per site; null when it failed
    std::vector<int> ifindex_;
    std::chrono::steady_clock::time_point start_;
    std::mutex mutex_;
    std::condition_variable wake_;
    bool stopping_ = false;
    std::thread thread_;  // last: started once everything above exists
};

}  // namespace wanlab::diagnosis
