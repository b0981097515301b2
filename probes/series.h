// Time series of a measurement: what a probe saw over its duration, not only at its end.
//
// Contract: a Series holds values at times in seconds since the measurement began, in the
// order taken; for a rate or a mean over an interval the time is the interval's end. Names
// say the unit (series_unit()); docs/probes.md ("Time series") lists them. IntervalTally
// is used by one thread; merge() the tallies of several. Pure otherwise; thread-safe.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "probes/probe_spec.h"

namespace wanlab::probes {

struct Series {
    std::vector<double> t;
    std::vector<double> value;
    void add(double at, double v) {
        t.push_back(at);
        value.push_back(v);
    }
    std::size_t size() const { return t.size(); }
};

using SeriesMap = std::map<std::string, Series>;

/// The unit of a series by its name's last component ("stream1.cwnd" -> count, segments;
/// "router.up.backlog" -> bytes; "latency_mean" -> seconds; "requests_per_second").
Unit series_unit(std::string_view name);

/// Completions and their latencies per fixed interval of a request/response load.
class IntervalTally {
public:
    explicit IntervalTally(double interval_s = 1) : interval_(interval_s > 0 ? interval_s : 1) {}
    /// A transaction that completed `at` seconds after the start and took `latency` seconds.
    void record(double at, double latency);
    /// Adds the other's counts; a tally that has recorded nothing takes the other's interval.
    void merge(const IntervalTally& other);
    /// Adds per interval up to `elapsed` seconds: RATE_NAME (completions per second),
    /// "latency_mean" and "latency_max" (seconds; none for an interval without completions).
    /// A last interval shorter than half an interval is left out; a longer one's rate is
    /// over its own length.
    void add_series(SeriesMap& out, const std::string& rate_name, double elapsed) const;

private:
    struct Bucket {
        double count = 0, sum = 0, max = 0;
    };
    double interval_;
    std::vector<Bucket> buckets_;
};

}  // namespace wanlab::probes
