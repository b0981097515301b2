#include "probes/series.h"

#include <algorithm>
#include <cmath>

namespace wanlab::probes {

Unit series_unit(std::string_view name) {
    auto dot = name.rfind('.');
    std::string_view last = dot == std::string_view::npos ? name : name.substr(dot + 1);
    auto ends = [last](std::string_view s) { return last.ends_with(s); };
    if (last.starts_with("throughput") || ends("_rate") || last == "rate") return Unit::bits_per_second;
    if (ends("_per_second")) return Unit::per_second;
    if (last == "rtt" || last == "srtt" || ends("_rtt") || last.starts_with("latency") || ends("_time") ||
        last == "jitter" || last == "delay")
        return Unit::seconds;
    if (last == "loss") return Unit::fraction;
    if (last == "backlog" || ends("_bytes") || ends("_wnd") || last == "rcv_space" || last == "in_flight")
        return Unit::bytes;
    return Unit::count;  // cwnd, ssthresh (segments), retransmits, qlen, drops, packets
}

void IntervalTally::record(double at, double latency) {
    if (!(at >= 0) || !std::isfinite(at)) return;
    auto i = static_cast<std::size_t>(at / interval_);
    if (i >= buckets_.size()) buckets_.resize(i + 1);
    auto& b = buckets_[i];
    b.count += 1;
    b.sum += latency;
    b.max = std::max(b.max, latency);
}

void IntervalTally::merge(const IntervalTally& other) {
    if (buckets_.empty()) interval_ = other.interval_;
    if (other.buckets_.size() > buckets_.size()) buckets_.resize(other.buckets_.size());
    for (std::size_t i = 0; i < other.buckets_.size(); ++i) {
        buckets_[i].count += other.buckets_[i].count;
        buckets_[i].sum += other.buckets_[i].sum;
        buckets_[i].max = std::max(buckets_[i].max, other.buckets_[i].max);
    }
}

void IntervalTally::add_series(SeriesMap& out, const std::string& rate_name, double elapsed) const {
    if (!(elapsed > 0)) return;
    auto n = static_cast<std::size_t>(std::ceil(elapsed / interval_ - 1e-9));
    for (std::size_t i = 0; i < n; ++i) {
        double begin = static_cast<double>(i) * interval_, end = std::min(begin + interval_, elapsed);
        // A short tail (the transactions that finished after the window) is too few to be a
        // rate: it counts in the probe's totals, not as a point.
        if (end - begin < interval_ * 0.5) break;
        Bucket b = i < buckets_.size() ? buckets_[i] : Bucket{};
        out[rate_name].add(end, b.count / (end - begin));
        if (b.count > 0) {
            out["latency_mean"].add(end, b.sum / b.count);
            out["latency_max"].add(end, b.max);
        }
    }
}

}  // namespace wanlab::probes
