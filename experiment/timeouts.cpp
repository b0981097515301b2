#include "experiment/timeouts.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "probes/human.h"
#include "probes/probe.h"

namespace wanlab::experiment {
namespace {

constexpr double kMss = 1448;           // bytes: 1500-byte MTU less IPv4, TCP and timestamps
constexpr double kInitialWindow = 10;   // segments, RFC 6928 (Linux since 2.6.39)
constexpr double kMathis = 1.22;        // sqrt(3/2), Mathis et al. 1997 with delayed ACKs off
constexpr double kSuggestedMargin = 2;  // a suggested timeout: twice the estimate

double seconds(std::chrono::nanoseconds ns) { return std::chrono::duration<double>(ns).count(); }

double random_loss(const netem::Direction& d) {
    return d.netem.loss.model == netem::Loss::Model::random ? d.netem.loss.probability : 0;
}

}  // namespace

double ResponseTime::total() const { return std::max({slow_start, at_rate, at_loss}); }

ResponseTime response_time(double bytes, double rtt, double rate, double loss) {
    ResponseTime t;
    // Round k of slow start delivers IW x 2^(k-1) segments; the response needs the first k
    // with IW x (2^k - 1) >= its segments. One more round trip for the handshake.
    double segments = std::ceil(bytes / kMss);
    double rounds = std::ceil(std::log2(segments / kInitialWindow + 1));
    t.slow_start = rtt * (1 + std::max(rounds, 1.0));
    if (rate > 0) t.at_rate = rtt + bytes * 8 / rate;
    if (loss > 0 && rtt > 0) {
        t.loss_rate = kMss * 8 / rtt * kMathis / std::sqrt(loss);
        t.at_loss = rtt + bytes * 8 / t.loss_rate;
    }
    return t;
}

void warn_short_timeouts(const Experiment& exp, Diagnostics& diag) {
    struct Worst {
        const probes::ProbeSpec* probe = nullptr;
        const Trial* trial = nullptr;
        ResponseTime time;
        double bytes = 0, rtt = 0, loss = 0;
    };
    std::map<std::string, Worst> worst;  // by probe name
    for (const auto& t : exp.trials)
        for (const auto& p : t.probes) {
            // An http probe's response, or a transfer's bytes; a url's server is not ours to size.
            bool transfer = p.kind == "transfer";
            if ((p.kind != "http" && !transfer) || (!transfer && !probes::option_string(p, "url").empty())) continue;
            double bytes = static_cast<double>(probes::option_int(p, transfer ? "size" : "response_size"));
            double rtt = seconds(t.link.up.netem.delay + t.link.down.netem.delay);
            // A response or a download travels down, server to client; an upload up.
            const auto& way = transfer && probes::option_string(p, "direction") == "upload" ? t.link.up : t.link.down;
            auto time = response_time(bytes, rtt, static_cast<double>(way.rate_bps), random_loss(way));
            auto& w = worst[p.name];
            if (!w.probe || time.total() > w.time.total()) w = {&p, &t, time, bytes, rtt, random_loss(way)};
        }
    for (const auto& [name, w] : worst) {
        double timeout = static_cast<double>(probes::option_int(*w.probe, "timeout")) / 1e9;
        if (w.time.total() <= timeout) continue;
        std::string parts = fmt::format("about {} of handshake and slow start at {} RTT",
                                        probes::human(probes::Unit::seconds, w.time.slow_start),
                                        probes::human(probes::Unit::seconds, w.rtt));
        if (w.time.at_rate > 0)
            parts += fmt::format(", {} at the configured rate", probes::human(probes::Unit::seconds, w.time.at_rate));
        if (w.time.at_loss > 0)
            parts += fmt::format(", {} at the {} loss-based TCP sustains at {} loss (Mathis)",
                                 probes::human(probes::Unit::seconds, w.time.at_loss),
                                 probes::human(probes::Unit::bits_per_second, w.time.loss_rate),
                                 probes::human(probes::Unit::fraction, w.loss));
        double suggested = std::ceil(w.time.total() * kSuggestedMargin);
        diag.warning(
            w.probe->at,
            fmt::format("probe `{}`: `timeout` = {} may be shorter than one {} {} on the path of "
                        "trial {} ({}): {}",
                        name, probes::human(probes::Unit::seconds, timeout),
                        probes::human(probes::Unit::bytes, w.bytes),
                        w.probe->kind == "transfer" ? "transfer" : "response", w.trial->index, w.trial->variant, parts),
            fmt::format("a {} that times out leaves no sample, and the ones that remain are the fast ones; "
                        "set `timeout = \"{:.0f}s\"` or more",
                        w.probe->kind == "transfer" ? "transfer" : "request", suggested));
    }
}

}  // namespace wanlab::experiment
