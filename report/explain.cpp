// explain(): sentences the measurements support, for the reader who asks "why this number?".
//
// Two kinds, and nothing without the data behind it:
//  - the diagnosis of each probe in each trial (diagnosis/rules.h), on evidence gathered
//    here from its repeats: metrics, TCP_INFO per connection, kernel counters, the link's
//    qdisc statistics, the trial's configuration;
//  - bandwidth-delay advice, from a trial's configured rate and RTT against the buffer
//    maxima the trial set (or, for keys it did not set, those the host had before the run).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <optional>
#include <sstream>
#include <utility>

#include <fmt/format.h>

#include "core/units.h"
#include "diagnosis/rules.h"
#include "probes/probe.h"
#include "probes/stats.h"
#include "report/detail.h"

namespace wanlab::report {
namespace {

using nlohmann::json;
using probes::Unit;
constexpr double kNaN = results::kNaN;

double number_at(const json& object, const std::string& key) {
    if (!object.is_object()) return kNaN;
    auto it = object.find(key);
    return it != object.end() && it->is_number() ? it->get<double>() : kNaN;
}

const json& values_of(const json& connection) {
    static const json kNone = json::object();
    if (!connection.is_object()) return kNone;
    auto it = connection.find("values");
    return it != connection.end() && it->is_object() ? *it : kNone;
}

double median_or_nan(std::vector<double> v) {
    std::erase_if(v, [](double x) { return !std::isfinite(x); });
    return probes::stats::median(std::move(v));  // NaN when empty
}

using Measurements = std::vector<const results::Measurement*>;

double metric_median(const Measurements& ms, const std::string& metric) {
    std::vector<double> v;
    for (const auto* m : ms)
        if (auto it = m->metrics.find(metric); it != m->metrics.end()) v.push_back(it->second);
    return median_or_nan(std::move(v));
}

// The share of its busy time one repeat spent limited by `what` ("rwnd_limited"): the
// probe's metric, else from its connections, weighted by their busy time when known.
double limited_share(const results::Measurement& m, const std::string& what) {
    if (auto it = m.metrics.find(what); it != m.metrics.end() && std::isfinite(it->second)) return it->second;
    double busy = 0, limited = 0, sum = 0;
    std::size_t n = 0;
    bool timed = true;
    for (const auto& c : m.connections) {
        const auto& v = values_of(c);
        double b = number_at(v, "busy_time"), l = number_at(v, what + "_time"), f = number_at(v, what);
        if (std::isfinite(b) && std::isfinite(l))
            busy += b, limited += l;
        else
            timed = false;
        if (std::isfinite(f)) sum += f, ++n;
    }
    if (timed && busy > 0) return limited / busy;
    return n ? sum / static_cast<double>(n) : kNaN;
}

// The buffer one stream had: the median over every connection of every repeat, else the
// probe's metric (the smallest connection's) when connections were not reported.
double granted(const Measurements& ms, const std::string& key) {
    std::vector<double> v;
    for (const auto* m : ms)
        for (const auto& c : m->connections) v.push_back(number_at(values_of(c), key));
    double per_stream = median_or_nan(v);
    return std::isfinite(per_stream) ? per_stream : metric_median(ms, key);
}

// The median of one TCP_INFO value over every connection of every repeat; NaN without one.
double connection_median(const Measurements& ms, const std::string& key) {
    std::vector<double> v;
    for (const auto* m : ms)
        for (const auto& c : m->connections) v.push_back(number_at(values_of(c), key));
    return median_or_nan(std::move(v));
}

std::size_t streams(const Measurements& ms) {
    std::size_t n = 0;
    for (const auto* m : ms) n = std::max(n, m->connections.size());
    return n;
}

std::string where(const results::Trial& t) {
    auto point = detail::point_label(t);
    return point.empty() ? t.variant : t.variant + " @ " + point;
}

std::string flag(const results::Trial& t) {
    return detail::emulation_failed(&t) ? " [! emulation did not hold in this trial]" : "";
}

// --- bandwidth-delay advice ---------------------------------------------------------------

struct Buffer {
    const char* key;
    bool receive;  // sized on the receiving host (rmem) or the sending one (wmem)
    bool triple;   // "min default max"
};
const Buffer kBuffers[] = {
    {"net.core.rmem_max", true, false},
    {"net.ipv4.tcp_rmem", true, true},
    {"net.core.wmem_max", false, false},
    {"net.ipv4.tcp_wmem", false, true},
};

/// One value of a buffer key as it applied to the trial.
struct Setting {
    std::string host;  // "" for a global key
    std::vector<std::uint64_t> fields;
    bool before = false;  // not set by the trial: the host's value before the run
};

// "4096\t131072\t6291456", "212992" (as written to /proc/sys) or "64M" -> bytes.
std::optional<std::vector<std::uint64_t>> parse_fields(const std::string& value) {
    std::istringstream in(value);
    std::vector<std::uint64_t> fields;
    for (std::string word; in >> word;) {
        auto parsed = units::parse_size(word);
        if (!units::ok(parsed)) return std::nullopt;
        fields.push_back(std::get<std::uint64_t>(parsed));
    }
    if (fields.empty()) return std::nullopt;
    return fields;
}

std::vector<Setting> settings_of(const results::RunData& data, const results::Trial& t, const Buffer& b) {
    std::vector<Setting> out;
    for (const auto& kv : t.sysctls) {
        auto colon = kv.first.find(':');
        std::string host = colon == std::string::npos ? "" : kv.first.substr(0, colon);
        std::string key = colon == std::string::npos ? kv.first : kv.first.substr(colon + 1);
        if (key != b.key) continue;
        if (auto fields = parse_fields(kv.second); fields && (!b.triple || fields->size() == 3))
            out.push_back(Setting{host, *fields, false});
    }
    if (out.empty())
        if (auto it = data.run.env.sysctls_before.find(b.key); it != data.run.env.sysctls_before.end())
            if (auto fields = parse_fields(it->second); fields && (!b.triple || fields->size() == 3))
                out.push_back(Setting{"", *fields, true});
    return out;
}

// Does this host's value apply to the transfers measured? Upload: the server receives,
// the client sends; download the reverse. Global keys and host mode ("host") always do.
bool applies(const std::string& host, bool receive, const std::vector<std::string>& directions) {
    if (host.empty() || host == "host") return true;
    for (const auto& d : directions) {
        bool upload = d == "upload";
        if (receive && host == (upload ? "server" : "client")) return true;
        if (!receive && host == (upload ? "client" : "server")) return true;
    }
    return false;
}

std::uint64_t next_power_of_two(double x) {
    std::uint64_t p = 1;
    while (static_cast<double>(p) < x) p <<= 1;
    return p;
}

// Whether the bulk measurements' receive (or send) buffers were autotuned, so tcp_rmem
// (tcp_wmem) capped them, or explicitly asked, so rmem_max (wmem_max) did. Both, when the
// measurements differ; autotuned, when none says (an older run).
struct Sizing {
    bool autotuned = false, explicit_ask = false;
};
Sizing sizing_of(const Measurements& bulk, bool receive) {
    Sizing s;
    const char* marker = receive ? probes::kRcvbufAutotuned : probes::kSndbufAutotuned;
    for (const auto* m : bulk) {
        bool autotuned = std::any_of(m->notes.begin(), m->notes.end(),
                                     [marker](const std::string& n) { return n.starts_with(marker); });
        bool asked = std::any_of(m->notes.begin(), m->notes.end(), [receive](const std::string& n) {
            return n.starts_with(receive ? "rcvbuf: asked" : "sndbuf: asked") || n.starts_with("iperf3 -w");
        });
        s.autotuned = s.autotuned || autotuned || !asked;
        s.explicit_ask = s.explicit_ask || asked;
    }
    return s;
}

void bdp_advice(std::vector<std::string>& out, const results::RunData& data, const results::Trial& t,
                const Measurements& bulk) {
    if (!(t.link_rate > 0 && t.link_rtt > 0) || bulk.empty()) return;  // buffers matter to bulk transfers
    std::vector<std::string> directions;
    for (const auto* m : bulk)
        for (const auto& c : m->connections)
            if (c.is_object() && c.contains("direction") && c["direction"].is_string())
                directions.push_back(c["direction"].get<std::string>());
    if (directions.empty()) directions = {"upload", "download"};  // unknown: either could apply

    double bdp = t.link_rate * t.link_rtt / 8;
    // With the default tcp_adv_win_scale the kernel keeps about half of a socket buffer for
    // its own overhead, so a window of one BDP needs a buffer of two.
    auto target = next_power_of_two(2 * bdp);
    std::vector<std::string> below_bdp, below_twice, set;
    bool core = false, autotuned = false;
    for (const auto& b : kBuffers) {
        // Advice only where it can change the result: an autotuned buffer is capped by
        // tcp_rmem/tcp_wmem, an explicit SO_RCVBUF/SO_SNDBUF (iperf3 -w) by rmem_max/wmem_max.
        auto sizing = sizing_of(bulk, b.receive);
        if (b.triple ? !sizing.autotuned : !sizing.explicit_ask) continue;
        for (const auto& s : settings_of(data, t, b)) {
            if (!applies(s.host, b.receive, directions)) continue;
            double max = static_cast<double>(s.fields.back());
            if (max >= 2 * bdp) continue;
            auto on = s.host.empty() ? std::string() : " on " + s.host;
            auto name = fmt::format("{}{}{} = {} ({})", b.key, b.triple ? " max" : "", on, s.fields.back(),
                                    detail::human_bytes(max)) +
                        (s.before ? " before the run" : "");
            (max < bdp ? below_bdp : below_twice).push_back(name);
            if (b.triple)
                set.push_back(fmt::format("{}=\"{} {} {}\"{}", b.key, s.fields[0], s.fields[1], target, on));
            else
                set.push_back(fmt::format("{}={}{}", b.key, target, on));
            core = core || !b.triple;
            autotuned = autotuned || b.triple;
        }
    }
    if (set.empty()) return;
    auto s = fmt::format("{}: bandwidth-delay product {} x {} = {} ({:.0f} bytes)", where(t),
                         probes::human(Unit::bits_per_second, t.link_rate), probes::human(Unit::seconds, t.link_rtt),
                         detail::human_bytes(bdp), bdp);
    auto list = [](const std::vector<std::string>& v) {
        std::string joined;
        for (const auto& x : v) joined += (joined.empty() ? "" : ", ") + x;
        return joined;
    };
    if (!below_bdp.empty()) s += "; below the BDP: " + list(below_bdp);
    if (!below_twice.empty())
        s += "; below 2 x BDP (the kernel keeps about half of a buffer for overhead): " + list(below_twice);
    s += fmt::format("; set {} ({}, the power of two at or above 2 x BDP)", list(set),
                     detail::human_bytes(static_cast<double>(target)));
    if (core)
        s += "; rmem_max/wmem_max cap what an explicit SO_RCVBUF/SO_SNDBUF (iperf3 -w) gets, and such a buffer is "
             "not autotuned";
    if (autotuned)
        s += "; tcp_rmem/tcp_wmem max cap the autotuned buffers of a probe that asks for none (rmem_max/wmem_max "
             "would not change it)";
    out.push_back(s + flag(t));
}

// --- diagnosis (diagnosis/rules.h) ------------------------------------------------------

// A counter's median per repeat on `host`: 0 for a repeat whose counters were recorded but
// did not move it; NaN when no repeat recorded that host's counters.
double counter_median(const Measurements& ms, const std::string& host, const std::string& name) {
    std::vector<double> v;
    for (const auto* m : ms) {
        if (!m->counters.is_object()) continue;
        auto h = m->counters.find(host);
        if (h == m->counters.end() || !h->is_object()) continue;
        double x = number_at(*h, name);
        v.push_back(std::isfinite(x) ? x : 0);
    }
    return median_or_nan(std::move(v));
}

// One direction's queues from the "qdisc" counters of each repeat (diagnosis/qdisc_watch.h);
// nullopt when no repeat recorded that direction.
std::optional<diagnosis::QueueEvidence> queue_of(const results::Trial& t, const Measurements& ms,
                                                 const std::string& direction) {
    // NaN when no repeat has the counter (a role the tree does not have), unlike counter_median.
    auto median = [&](const std::string& role, const std::string& what) {
        std::vector<double> v;
        for (const auto* m : ms)
            if (auto q = m->counters.find("qdisc"); q != m->counters.end())
                v.push_back(number_at(*q, direction + "." + role + "." + what));
        return median_or_nan(std::move(v));
    };
    diagnosis::QueueEvidence q;
    q.direction = direction;
    q.loss = direction == "up" ? t.link_loss : t.link_loss_down;
    q.netem_sent = median("netem", "sent_packets");
    if (!std::isfinite(q.netem_sent)) return std::nullopt;
    q.netem_drops = median("netem", "drops");
    q.netem_limit = median("netem", "limit");
    q.netem_peak = median("netem", "qlen_peak");
    // netem's child is the shaper when there is one, else the queue: its drops are in netem's.
    double shaper = median("shaper", "drops"), queue = median("queue", "drops");
    q.child_drops = std::isfinite(shaper) ? shaper : queue;
    // The fifo that overflows: the queue below the shaper, else the tbf's own (when its limit is known).
    for (const char* role : {"queue", "shaper"}) {
        double limit = median(role, "limit"), limit_bytes = median(role, "limit_bytes");
        bool exists = std::isfinite(median(role, "sent_packets"));
        if (!exists) continue;
        if (std::isfinite(limit) || std::isfinite(limit_bytes)) {
            q.bottleneck = role;
            q.bottleneck_limit = limit;
            q.bottleneck_limit_bytes = limit_bytes;
            q.bottleneck_drops = median(role, "drops");
            q.bottleneck_sent = median(role, "sent_packets");
            q.bottleneck_peak = median(role, "qlen_peak");
        }
        break;  // an AQM queue below the shaper drops on purpose: no overflow to name
    }
    return q;
}

bool has_note(const Measurements& ms, const char* note) {
    return std::any_of(ms.begin(), ms.end(), [note](const auto* m) {
        return std::find(m->notes.begin(), m->notes.end(), note) != m->notes.end();
    });
}

diagnosis::Evidence evidence_of(const results::Trial& t, const Measurements& ms) {
    diagnosis::Evidence e;
    e.kind = ms.front()->kind;
    e.rtt_configured = t.link_rtt;
    e.rate_configured = t.link_rate;
    e.loss_configured = t.link_loss;
    e.min_rtt = connection_median(ms, "min_rtt");
    e.srtt = connection_median(ms, "rtt");
    e.mss = connection_median(ms, "mss");
    std::vector<double> rwnd, sndbuf;
    for (const auto* m : ms) {
        rwnd.push_back(limited_share(*m, "rwnd_limited"));
        sndbuf.push_back(limited_share(*m, "sndbuf_limited"));
    }
    e.rwnd_limited = median_or_nan(std::move(rwnd));
    e.sndbuf_limited = median_or_nan(std::move(sndbuf));
    e.rcvbuf = granted(ms, "rcvbuf_granted");
    e.sndbuf = granted(ms, "sndbuf_granted");
    e.streams = static_cast<double>(streams(ms));
    e.client_quickack = has_note(ms, probes::kClientQuickackNote);
    for (const char* direction : {"up", "down"})
        if (auto q = queue_of(t, ms, direction)) e.queues.push_back(*q);
    for (const auto* m : ms)
        for (const auto& c : m->connections)
            if (e.congestion_control.empty() && c.is_object() && c.contains("congestion_control") &&
                c["congestion_control"].is_string())
                e.congestion_control = c["congestion_control"].get<std::string>();
    e.throughput = metric_median(ms, "throughput");
    e.rtt_p50 = metric_median(ms, "rtt_p50");
    e.under_load = std::any_of(ms.begin(), ms.end(), [](const auto* m) {
        return std::any_of(m->notes.begin(), m->notes.end(),
                           [](const auto& n) { return n.starts_with(probes::kUnderLoadNote); });
    });
    e.latency_mean = metric_median(ms, "latency_mean");
    if (const char* count = probes::traits_of(e.kind).exchanges_metric) e.transactions = metric_median(ms, count);
    e.client_delayed_acks = counter_median(ms, "client", "TcpExt.DelayedACKs");
    std::vector<double> cpu;
    for (const auto* m : ms) {
        cpu.push_back(number_at(m->counters, "cpu_busiest"));
        if (auto it = m->counters.find("cpu_busiest_machine"); it != m->counters.end() && it->is_string())
            e.cpu_machine = it->get<std::string>();
    }
    e.cpu_busiest = median_or_nan(std::move(cpu));
    return e;
}

// The trial's measurements, per probe in the order the probes were first measured.
std::vector<std::pair<std::string, Measurements>> by_probe(const results::RunData& data, const results::Trial& t) {
    std::vector<std::pair<std::string, Measurements>> out;
    for (const auto& m : data.measurements) {
        if (m.trial != t.index) continue;
        auto it = std::find_if(out.begin(), out.end(), [&m](const auto& g) { return g.first == m.probe; });
        if (it == out.end()) it = out.insert(out.end(), {m.probe, {}});
        it->second.push_back(&m);
    }
    return out;
}

}  // namespace

std::vector<std::string> explain(const results::RunData& data) {
    std::vector<std::string> out;
    for (const auto& t : data.trials) {
        auto probes = by_probe(data, t);
        Measurements bulk;
        for (const auto& [name, ms] : probes)
            if (probes::traits_of(ms.front()->kind).bulk_tcp) bulk.insert(bulk.end(), ms.begin(), ms.end());
        if (auto v = diagnosis::emulation_not_held(t.check.held, t.check.note))
            out.push_back(fmt::format("{}: {}", where(t), v->text));
        // Every probe's diagnosis (diagnosis/rules.h), on the repeats that measured.
        bool rate_bound = false;
        for (const auto& [name, ms] : probes) {
            Measurements measured;
            std::copy_if(ms.begin(), ms.end(), std::back_inserter(measured),
                         [](const auto* m) { return !m->metrics.empty(); });
            if (measured.empty()) continue;
            for (const auto& v : diagnosis::diagnose(evidence_of(t, measured))) {
                rate_bound = rate_bound || v.rule == "rate-bound";
                out.push_back(fmt::format("{}, {}: {}{}", name, where(t), v.text, flag(t)));
            }
        }
        // A link whose rate is the bound gains nothing from bigger buffers.
        if (!rate_bound) bdp_advice(out, data, t, bulk);
    }
    return out;
}

}  // namespace wanlab::report
