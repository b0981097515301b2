#include "netem/player.h"

#include <sys/prctl.h>

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"

namespace wanlab::netem {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The handles of the tree on the device: netem at the layout's, the shaper and queue wherever
// a trial before put them (netem/device.cpp grafts a changed kind at the alternate handle).
TreeLayout found_layout(const std::vector<TcObject>& qdiscs, const TreeLayout& layout, const std::string& dev) {
    bool netem = std::any_of(qdiscs.begin(), qdiscs.end(),
                             [&](const TcObject& q) { return q.handle == layout.netem && q.kind == "netem"; });
    TreeLayout out = layout;
    // Without netem (bench/ on a kernel that has none) the shaper hangs at the root: a
    // schedule there may change the rate only (change() refuses the rest).
    const TcObject* shaper = child_of(qdiscs, netem ? layout.netem | 1 : layout.netem_parent);
    if (!netem && !shaper)
        throw Error(
            fmt::format("the link's schedule cannot start: {} has no netem qdisc {:x}:", dev, layout.netem >> 16));
    if (!netem) out.netem = 0;
    if (shaper) {
        out.shaper = shaper->handle;
        if (const TcObject* queue = child_of(qdiscs, shaper->handle | 1)) out.queue = queue->handle;
    }
    return out;
}

}  // namespace

std::vector<PlayerSite> open_sites(const std::vector<QdiscSite>& sites) {
    std::vector<PlayerSite> out;
    for (const auto& s : sites) out.push_back({s.direction, std::make_unique<NetlinkKernel>(s.netns), s.dev, s.layout});
    return out;
}

SchedulePlayer::SchedulePlayer(const Schedule& schedule, std::vector<PlayerSite> sites, std::uint32_t mtu,
                               const Psched& psched)
    : schedule_(schedule), mtu_(mtu), psched_(psched) {
    const auto& base = schedule.steps.front();
    for (auto& s : sites) {
        if (!base.of(s.direction).scheduled) continue;
        Lane lane;
        lane.ifindex = s.kernel->ifindex(s.dev);
        lane.layout = found_layout(s.kernel->dump(lane.ifindex, false), s.layout, s.dev);
        lane.site = std::move(s);
        lanes_.push_back(std::move(lane));
    }
    for (const char* dir : {"up", "down"})
        if (base.of(dir).scheduled &&
            std::none_of(lanes_.begin(), lanes_.end(), [&](const Lane& l) { return l.site.direction == dir; }))
            throw Error(fmt::format("the link's schedule changes the {} direction, which has no qdisc here", dir));
}

SchedulePlayer::~SchedulePlayer() {
    try {
        finish();
    } catch (const std::exception& e) {
        fmt::print(stderr, "wanlab: putting the link back after its schedule: {}\n", e.what());
    }
}

void SchedulePlayer::start() {
    start_ = std::chrono::steady_clock::now();
    if (!schedule_.empty() && !lanes_.empty()) thread_ = std::thread([this] { loop(); });
}

std::vector<Request> SchedulePlayer::requests(const Lane& lane, std::size_t to) const {
    const Direction& from = schedule_.steps[lane.current].of(lane.site.direction);
    const Direction& want = schedule_.steps[to].of(lane.site.direction);
    std::vector<Request> out;
    if (same_conditions(from, want)) return out;
    if (!(from.netem == want.netem)) {
        if (lane.layout.netem == 0)
            throw Error(fmt::format("{} has no netem qdisc for the schedule to change", lane.site.dev));
        out.push_back(netem_request(want.netem, lane.ifindex, lane.site.dev, lane.layout.netem_parent,
                                    lane.layout.netem, psched_));
    }
    if (from.rate_bps != want.rate_bps) {
        auto parent = lane.layout.netem ? lane.layout.netem | 1 : lane.layout.netem_parent;
        auto shaper = shaper_requests(want, lane.ifindex, lane.site.dev, parent, mtu_, psched_, lane.layout);
        // The kernel cannot change an htb qdisc in place (netem/device.cpp): its class carries
        // the rate. A pfifo/bfifo queue follows tbf again, whose change resets a fifo child's
        // limit (tbf_change -> fifo_set_limit).
        if (want.shaper == Shaper::htb && !shaper.empty()) shaper.erase(shaper.begin());
        for (auto& r : shaper) out.push_back(std::move(r));
    }
    return out;
}

bool SchedulePlayer::send(Lane& lane, std::size_t to, const std::vector<Request>& requests) {
    for (const auto& r : requests) lane.site.kernel->send(r);
    lane.current = to;
    return !requests.empty();
}

void SchedulePlayer::loop() {
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);  // wake at the instant, not up to 50 us after it
    const auto& steps = schedule_.steps;
    std::unique_lock lock(mutex_);
    for (std::int64_t k = 0;; ++k) {
        for (std::size_t i = k == 0 ? 1 : 0; i < steps.size(); ++i) {
            auto offset = schedule_.period * k + steps[i].at;
            auto when = start_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(offset);
            // The requests are built before the instant (a distribution table is read from a
            // file, tbf's rate table computed): at the instant, only the sends.
            std::vector<std::vector<Request>> pending;
            std::string error;
            try {
                for (const auto& lane : lanes_) pending.push_back(requests(lane, i));
            } catch (const std::exception& e) {
                error = e.what();
            }
            if (wake_.wait_until(lock, when, [this] { return stopping_; })) return;
            lock.unlock();
            std::vector<std::string> changed;
            try {
                for (std::size_t l = 0; error.empty() && l < lanes_.size(); ++l)
                    if (send(lanes_[l], i, pending[l])) changed.push_back(lanes_[l].site.direction);
            } catch (const std::exception& e) {
                error = e.what();
            }
            double applied = seconds_since(start_);
            lock.lock();
            if (!changed.empty())
                log_.changes.push_back({i, std::chrono::duration<double>(offset).count(), applied,
                                        changed.size() > 1 ? "both" : changed.front()});
            if (!error.empty()) {
                log_.error = fmt::format("at {:.3f} s: {}", applied, error);
                return;
            }
        }
        if (schedule_.period.count() <= 0) return;
    }
}

void SchedulePlayer::stop() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
}

PlayLog SchedulePlayer::finish() {
    if (finished_) return log_;
    stop();
    finished_ = true;
    log_.ended = seconds_since(start_);
    for (auto& lane : lanes_) send(lane, 0, requests(lane, 0));  // [link]'s own state, for the next repeat
    return log_;
}

Lateness lateness_of(const PlayLog& log) {
    Lateness out;
    std::vector<double> late;
    for (const auto& c : log.changes) late.push_back(std::max(0.0, c.applied - c.scheduled));
    out.changes = late.size();
    if (late.empty()) return out;
    std::sort(late.begin(), late.end());
    auto at = [&](double q) {
        double pos = q * static_cast<double>(late.size() - 1);
        auto lo = static_cast<std::size_t>(std::floor(pos));
        auto hi = std::min(lo + 1, late.size() - 1);
        return late[lo] + (late[hi] - late[lo]) * (pos - static_cast<double>(lo));
    };
    out.median = at(0.5);
    out.p99 = at(0.99);
    out.max = late.back();
    return out;
}

}  // namespace wanlab::netem
