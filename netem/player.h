// SchedulePlayer: plays a netem::Schedule on the link's qdiscs while a measurement runs.
//
// Creates: nothing on the machine. On construction it reads each direction's tree (which
// handles the shaper and queue sit at) and keeps one route socket per direction; start()
// starts a thread that, at each step's instant (absolute times on CLOCK_MONOTONIC from
// start(), with a 1 ns timer slack), sends the requests that change that direction's netem
// qdisc (and its shaper, when the rate changes) in place: create-or-replace on the handles
// already there, never a delete, so no instant goes without shaping. Each change is logged
// with its scheduled instant and the instant the kernel acknowledged its last request.
// Undoes: finish() (and the destructor) stop the thread and put [link]'s own state (step 0)
// back on every direction a step changed. A failed request stops the schedule: finish()
// reports it in the log, and the tree stays what the kernel last accepted until that
// restore. The run's journal holds the snapshot from before the run, which restore replays
// whatever state a kill leaves. Not thread-safe (one caller; the thread is internal).
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "netem/encode.h"
#include "netem/kernel.h"
#include "netem/schedule.h"

namespace wanlab::netem {

/// One direction's tree as the player changes it.
struct PlayerSite {
    std::string direction;  ///< "up" or "down"
    std::unique_ptr<QdiscKernel> kernel;
    std::string dev;
    TreeLayout layout;
};

/// A route socket per site, in its namespace (throws wanlab::Error).
std::vector<PlayerSite> open_sites(const std::vector<QdiscSite>& sites);

struct AppliedChange {
    std::size_t step = 0;   ///< index into Schedule::steps
    double scheduled = 0;   ///< seconds after start()
    double applied = 0;     ///< seconds after start(), when the kernel acknowledged it
    std::string direction;  ///< "up", "down", or "both"
};

struct PlayLog {
    std::vector<AppliedChange> changes;
    std::string error;  ///< why the schedule stopped early ("" = it ran to the end or was stopped)
    double ended = 0;   ///< seconds after start() when finish() stopped it
};

class SchedulePlayer {
public:
    /// Throws wanlab::Error when a direction the schedule changes has no site, or its tree
    /// has no netem qdisc at the layout's handle.
    SchedulePlayer(const Schedule& schedule, std::vector<PlayerSite> sites, std::uint32_t mtu, const Psched& psched);
    ~SchedulePlayer();
    SchedulePlayer(const SchedulePlayer&) = delete;
    SchedulePlayer& operator=(const SchedulePlayer&) = delete;

    /// Starts the clock: step k takes effect steps[k].at after now.
    void start();
    /// Stops, puts step 0 back, and returns what was applied.
    PlayLog finish();

private:
    struct Lane {
        PlayerSite site;
        int ifindex = 0;
        TreeLayout layout;        ///< the handles found on the device
        std::size_t current = 0;  ///< the step whose state the device holds
    };
    void loop();
    /// What takes `lane` from its current step to step `to` (none when nothing differs).
    std::vector<Request> requests(const Lane& lane, std::size_t to) const;
    /// Sends them; false when there were none.
    bool send(Lane& lane, std::size_t to, const std::vector<Request>& requests);
    void stop();

    const Schedule& schedule_;
    std::vector<Lane> lanes_;
    std::uint32_t mtu_;
    Psched psched_;
    std::chrono::steady_clock::time_point start_;
    std::mutex mutex_;
    std::condition_variable wake_;
    bool stopping_ = false;
    bool finished_ = false;
    PlayLog log_;
    std::thread thread_;
};

/// Lateness of the applied changes, in seconds: from the scheduled instant to the kernel's ACK.
struct Lateness {
    std::size_t changes = 0;
    double median = 0, p99 = 0, max = 0;
};
Lateness lateness_of(const PlayLog& log);

}  // namespace wanlab::netem
