#include "diagnosis/qdisc_watch.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include <linux/netlink.h>
#include <linux/pkt_sched.h>

#include <fmt/format.h>

#include "core/error.h"

namespace wanlab::diagnosis {
namespace {

/// The role of the qdisc with `handle` in the tree of `layout` (the shaper and the queue at
/// either of their handles), or "" for one that is not wanlab's (host mode's htb root and
/// its default class, say).
std::string role_of(std::uint32_t handle, const netem::TreeLayout& layout) {
    if (handle == layout.netem) return "netem";
    if (handle == layout.shaper || handle == layout.shaper + netem::kAlternateHandle) return "shaper";
    if (handle == layout.queue || handle == layout.queue + netem::kAlternateHandle) return "queue";
    return "";
}

std::uint32_t u32_at(const std::vector<std::uint8_t>& bytes, std::size_t offset) {
    std::uint32_t v = 0;
    if (bytes.size() >= offset + sizeof v) std::memcpy(&v, bytes.data() + offset, sizeof v);
    return v;
}

// tbf's options nest TCA_TBF_PARMS, a tc_tbf_qopt whose limit (bytes) follows two
// 12-byte tc_ratespecs.
std::optional<double> tbf_limit(const std::vector<std::uint8_t>& options) {
    std::size_t off = 0;
    while (off + NLA_HDRLEN <= options.size()) {
        nlattr a;
        std::memcpy(&a, options.data() + off, sizeof a);
        if (a.nla_len < NLA_HDRLEN || off + a.nla_len > options.size()) break;
        if ((a.nla_type & NLA_TYPE_MASK) == TCA_TBF_PARMS && a.nla_len >= NLA_HDRLEN + sizeof(tc_tbf_qopt)) {
            tc_tbf_qopt q;
            std::memcpy(&q, options.data() + off + NLA_HDRLEN, sizeof q);
            return q.limit;
        }
        off += NLA_ALIGN(a.nla_len);
    }
    return std::nullopt;
}

}  // namespace

QdiscTally::QdiscTally(std::vector<QdiscSite> sites) : sites_(std::move(sites)), roles_(sites_.size()) {}

void QdiscTally::add(std::size_t i, double t, const std::vector<netem::TcObject>& qdiscs) {
    if (i >= sites_.size()) return;
    for (const auto& q : qdiscs) {
        auto name = role_of(q.handle, sites_[i].layout);
        if (name.empty() || !q.stats.present) continue;
        auto [it, fresh] = roles_[i].try_emplace(name);
        Role& r = it->second;
        if (fresh) {
            r.first = q.stats;
        } else {
            r.drops.add(t, static_cast<double>(q.stats.drops - r.last.drops));
            if (t > r.last_t) r.sent.add(t, static_cast<double>(q.stats.bytes - r.last.bytes) * 8 / (t - r.last_t));
            const auto dropped = static_cast<double>(q.stats.drops - r.last.drops);
            const auto offered = dropped + static_cast<double>(q.stats.packets - r.last.packets);
            if (name == "netem" && offered > 0) r.lost.add(t, dropped / offered);
        }
        r.last_t = t;
        r.last = q.stats;
        r.qlen_peak = std::max(r.qlen_peak, q.stats.qlen);
        r.backlog_peak = std::max(r.backlog_peak, q.stats.backlog);
        r.backlog.add(t, q.stats.backlog);
        // The limit the kernel holds: tc_netem_qopt.limit (packets) follows its latency;
        // tc_fifo_qopt is the limit alone (packets for pfifo, bytes for bfifo).
        if (q.kind == "netem") {
            r.limit = u32_at(q.options, 4);
        } else if (q.kind == "pfifo" || q.kind == "bfifo") {
            r.limit = u32_at(q.options, 0);
            r.limit_in_bytes = q.kind == "bfifo";
        } else if (q.kind == "tbf") {
            if (auto limit = tbf_limit(q.options)) r.limit = *limit, r.limit_in_bytes = true;
        }
    }
}

nlohmann::json QdiscTally::counters() const {
    auto out = nlohmann::json::object();
    for (std::size_t i = 0; i < sites_.size(); ++i)
        for (const auto& [role, r] : roles_[i]) {
            const auto& name = role;  // clang 14 cannot capture a structured binding in a lambda
            auto key = [&](const char* what) { return fmt::format("{}.{}.{}", sites_[i].direction, name, what); };
            out[key("sent_packets")] = static_cast<double>(r.last.packets - r.first.packets);
            out[key("sent_bytes")] = static_cast<double>(r.last.bytes - r.first.bytes);
            out[key("drops")] = static_cast<double>(r.last.drops - r.first.drops);
            out[key("overlimits")] = static_cast<double>(r.last.overlimits - r.first.overlimits);
            out[key("requeues")] = static_cast<double>(r.last.requeues - r.first.requeues);
            out[key("qlen_peak")] = r.qlen_peak;
            out[key("backlog_peak")] = r.backlog_peak;
            if (r.limit >= 0) out[key(r.limit_in_bytes ? "limit_bytes" : "limit")] = r.limit;
        }
    return out;
}

void QdiscTally::add_series(probes::SeriesMap& series) const {
    for (std::size_t i = 0; i < sites_.size(); ++i)
        for (const auto& [role, r] : roles_[i]) {
            const auto& name = role;  // as in counters()
            auto key = [&](const char* what) { return fmt::format("qdisc.{}.{}.{}", sites_[i].direction, name, what); };
            if (r.backlog.size() > 0) series[key("backlog")] = r.backlog;
            if (r.drops.size() > 0) series[key("drops")] = r.drops;
            if (r.sent.size() > 0 && name == "netem") series[key("throughput")] = r.sent;
            if (r.lost.size() > 0) series[key("loss")] = r.lost;
        }
}

QdiscWatch::QdiscWatch(std::vector<QdiscSite> sites, std::chrono::milliseconds interval)
    : sites_(std::move(sites)), interval_(interval), tally_(sites_) {
    for (const auto& s : sites_) {
        try {
            auto k = std::make_unique<netem::NetlinkKernel>(s.netns);
            ifindex_.push_back(k->ifindex(s.dev));
            kernels_.push_back(std::move(k));
        } catch (const Error&) {
            ifindex_.push_back(0);  // no evidence from this site, not a failed measurement
            kernels_.push_back(nullptr);
        }
    }
    start_ = std::chrono::steady_clock::now();
    sample();  // the baseline, before the probe starts
    thread_ = std::thread([this] { loop(); });
}

QdiscWatch::~QdiscWatch() { stop(); }

void QdiscWatch::sample() {
    auto since = [this] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); };
    for (std::size_t i = 0; i < sites_.size(); ++i) {
        if (!kernels_[i]) continue;
        try {
            // Each dump at its own instant, the middle of its round trip: under an emulated
            // CPU a dump takes milliseconds, which would skew a 100 ms rate by as many percent.
            double asked = since();
            auto qdiscs = kernels_[i]->dump(ifindex_[i], false);
            tally_.add(i, (asked + since()) / 2, qdiscs);
        } catch (const std::exception&) {
            kernels_[i].reset();  // the device or namespace is gone: stop asking
        }
    }
}

void QdiscWatch::loop() {
    std::unique_lock lock(mutex_);
    while (!wake_.wait_for(lock, interval_, [this] { return stopping_; })) {
        lock.unlock();
        sample();
        lock.lock();
    }
}

void QdiscWatch::stop() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
}

const QdiscTally& QdiscWatch::finish() {
    stop();
    sample();  // the last, after the probe's traffic
    return tally_;
}

}  // namespace wanlab::diagnosis
