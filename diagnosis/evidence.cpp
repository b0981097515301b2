#include "diagnosis/evidence.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <optional>

#include "probes/probe.h"
#include "probes/stats.h"

namespace wanlab::diagnosis {
namespace {

constexpr double kNaN = results::kNaN;

double number_at(const nlohmann::json& object, const std::string& key) {
    if (!object.is_object()) return kNaN;
    auto it = object.find(key);
    return it != object.end() && it->is_number() ? it->get<double>() : kNaN;
}

const nlohmann::json& values_of(const nlohmann::json& connection) {
    static const nlohmann::json kNone = nlohmann::json::object();
    if (!connection.is_object()) return kNone;
    auto it = connection.find("values");
    return it != connection.end() && it->is_object() ? *it : kNone;
}

double median_or_nan(std::vector<double> v) {
    std::erase_if(v, [](double x) { return !std::isfinite(x); });
    return probes::stats::median(std::move(v));  // NaN when empty
}

double metric_median(const Repeats& ms, const std::string& metric) {
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
double granted(const Repeats& ms, const std::string& key) {
    std::vector<double> v;
    for (const auto* m : ms)
        for (const auto& c : m->connections) v.push_back(number_at(values_of(c), key));
    double per_stream = median_or_nan(v);
    return std::isfinite(per_stream) ? per_stream : metric_median(ms, key);
}

// The median of one TCP_INFO value over every connection of every repeat; NaN without one.
double connection_median(const Repeats& ms, const std::string& key) {
    std::vector<double> v;
    for (const auto* m : ms)
        for (const auto& c : m->connections) v.push_back(number_at(values_of(c), key));
    return median_or_nan(std::move(v));
}

std::size_t streams(const Repeats& ms) {
    std::size_t n = 0;
    for (const auto* m : ms) n = std::max(n, m->connections.size());
    return n;
}

// A counter's median per repeat on `host`: 0 for a repeat whose counters were recorded but
// did not move it; NaN when no repeat recorded that host's counters.
double counter_median(const Repeats& ms, const std::string& host, const std::string& name) {
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
std::optional<QueueEvidence> queue_of(const results::Trial& t, const Repeats& ms, const std::string& direction) {
    // NaN when no repeat has the counter (a role the tree does not have), unlike counter_median.
    auto median = [&](const std::string& role, const std::string& what) {
        std::vector<double> v;
        for (const auto* m : ms)
            if (auto q = m->counters.find("qdisc"); q != m->counters.end())
                v.push_back(number_at(*q, direction + "." + role + "." + what));
        return median_or_nan(std::move(v));
    };
    QueueEvidence q;
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

bool has_note(const Repeats& ms, const char* note) {
    return std::any_of(ms.begin(), ms.end(), [note](const auto* m) {
        return std::find(m->notes.begin(), m->notes.end(), note) != m->notes.end();
    });
}

// The phases of a scheduled link (counters "schedule.phases", run/schedule_check.h), each the
// median over the repeats that went through it: the k-th phase of every repeat, where the
// repeats agree on its entry (every repeat of a schedule goes through the same entries).
std::vector<PhaseEvidence> phases_of(const Repeats& ms) {
    std::vector<const nlohmann::json*> lists;
    for (const auto* m : ms)
        if (auto it = m->counters.find("schedule"); it != m->counters.end() && it->is_object())
            if (auto p = it->find("phases"); p != it->end() && p->is_array()) lists.push_back(&*p);
    std::vector<PhaseEvidence> out;
    for (std::size_t k = 0;; ++k) {
        std::vector<const nlohmann::json*> at;
        for (const auto* l : lists)
            if (k < l->size() && (*l)[k].is_object()) at.push_back(&(*l)[k]);
        if (at.empty()) break;
        const double entry = number_at(*at.front(), "entry");
        std::erase_if(at, [entry](const auto* p) { return number_at(*p, "entry") != entry; });
        auto median = [&at](auto&& value) {
            std::vector<double> v;
            for (const auto* p : at) v.push_back(value(*p));
            return median_or_nan(std::move(v));
        };
        auto in = [](const char* object, const char* key) {
            return [object, key](const nlohmann::json& p) {
                auto it = p.find(object);
                return it != p.end() ? number_at(*it, key) : kNaN;
            };
        };
        PhaseEvidence pe;
        pe.entry = entry;
        pe.from = median([](const nlohmann::json& p) { return number_at(p, "from"); });
        pe.to = median([](const nlohmann::json& p) { return number_at(p, "to"); });
        pe.rate = median(in("link", "rate"));
        pe.outage = median(in("link", "outage"));
        pe.rtt = median(in("link", "rtt"));
        pe.loss = median(in("link", "loss"));
        pe.throughput = median(in("medians", "throughput"));
        pe.rtt_p50 = median(in("medians", "rtt"));
        out.push_back(pe);
    }
    return out;
}

}  // namespace

Evidence evidence_of(const results::Trial& t, const Repeats& ms) {
    Evidence e;
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
    std::vector<double> changes, late_median, late_p99;
    for (const auto* m : ms)
        if (auto it = m->counters.find("schedule"); it != m->counters.end() && it->is_object()) {
            changes.push_back(number_at(*it, "changes"));
            late_median.push_back(number_at(*it, "late_median"));
            late_p99.push_back(number_at(*it, "late_p99"));
            double most = number_at(*it, "late_max");
            if (!(e.schedule_late_max >= most)) e.schedule_late_max = most;
        }
    e.schedule_changes = median_or_nan(std::move(changes));
    std::vector<double> allowed, outage;
    for (const auto* m : ms)
        if (auto it = m->counters.find("schedule");
            it != m->counters.end() && it->is_object() && it->contains("allowed")) {
            allowed.push_back(number_at((*it)["allowed"], "rate"));
            outage.push_back(number_at((*it)["allowed"], "outage"));
        }
    e.schedule_rate = median_or_nan(std::move(allowed));
    e.schedule_outage = median_or_nan(std::move(outage));
    e.phases = phases_of(ms);
    e.schedule_late_median = median_or_nan(std::move(late_median));
    e.schedule_late_p99 = median_or_nan(std::move(late_p99));
    return e;
}

std::vector<std::pair<std::string, Repeats>> repeats_by_probe(const results::RunData& data, const results::Trial& t) {
    std::vector<std::pair<std::string, Repeats>> out;
    for (const auto& m : data.measurements) {
        if (m.trial != t.index) continue;
        auto it = std::find_if(out.begin(), out.end(), [&m](const auto& g) { return g.first == m.probe; });
        if (it == out.end()) it = out.insert(out.end(), {m.probe, {}});
        it->second.push_back(&m);
    }
    return out;
}

std::vector<ProbeDiagnosis> diagnose_probes(const results::RunData& data, const results::Trial& t) {
    std::vector<ProbeDiagnosis> out;
    for (const auto& [name, ms] : repeats_by_probe(data, t)) {
        Repeats measured;
        std::copy_if(ms.begin(), ms.end(), std::back_inserter(measured),
                     [](const auto* m) { return !m->metrics.empty(); });
        if (measured.empty()) continue;
        if (auto verdicts = diagnose(evidence_of(t, measured)); !verdicts.empty())
            out.push_back({name, std::move(verdicts)});
    }
    return out;
}

TrialDiagnosis diagnose_trial(const results::RunData& data, const results::Trial& t) {
    TrialDiagnosis d;
    d.emulation = emulation_not_held(t.check.held, t.check.note);
    d.probes = diagnose_probes(data, t);
    Repeats bulk;
    std::vector<std::string> bulk_probes;
    for (const auto& [name, ms] : repeats_by_probe(data, t))
        if (probes::traits_of(ms.front()->kind).bulk_tcp) {
            bulk.insert(bulk.end(), ms.begin(), ms.end());
            bulk_probes.push_back(name);
        }
    // Bigger buffers lift a bulk transfer only where a buffer is what binds it, or nothing is
    // shown to: not a full link, a loss rate, a queue's drops or a busy CPU.
    for (const auto& p : d.probes) {
        const auto& v = p.verdicts.front();
        bool bulk_probe = std::find(bulk_probes.begin(), bulk_probes.end(), p.probe) != bulk_probes.end();
        if (bulk_probe && v.role == Role::binding && v.rule != "receive-window-limited" &&
            v.rule != "send-buffer-limited")
            return d;
    }
    d.buffers = buffer_advice(data, t, bulk);
    return d;
}

}  // namespace wanlab::diagnosis
