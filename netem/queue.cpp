#include "netem/queue.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>
#include <linux/netlink.h>
#include <linux/pkt_sched.h>
#include <netlink/attr.h>

#include "core/units.h"
#include "netem/attributes.h"
#include "netem/encode.h"
#include "netem/readback.h"

namespace wanlab::netem {
namespace {

using config::Node;
using config::Reader;
using std::chrono::nanoseconds;
using U = QueueUnit;

constexpr double kU32 = 4294967295.0;
constexpr double kSec = 1e9;

// ---- the parameters -----------------------------------------------------------------------
// Ranges are what the kernel accepts (or, where it clamps silently, what it keeps as sent).

const QueueParam kTarget{"target", U::duration, 1e3, kU32 * 1e3, "the queueing delay the AQM aims for"};
const QueueParam kInterval{"interval", U::duration, 1e3, kU32 * 1e3,
                           "how long codel watches before acting (~ a worst-case RTT)"};
const QueueParam kCeThreshold{"ce_threshold", U::duration, 1e3, kU32 * 1e3,
                              "sojourn time above which packets are ECN-marked at once"};
const QueueParam kEcn{"ecn", U::flag, 0, 1, "mark ECN-capable packets instead of dropping them"};
const QueueParam kFlows{"flows", U::count, 1, 65536, "number of flow queues (hash buckets)"};
const QueueParam kQuantum{"quantum", U::bytes, 1, 1 << 20, "bytes a flow may send per round"};
const QueueParam kTupdate{"tupdate", U::duration, 1e3, kU32 * 1e3, "how often PIE recomputes its drop probability"};
const QueueParam kAlpha{"alpha", U::count, 0, 32, "PIE's weight of the delay error (tc's units: 0-32)"};
const QueueParam kBeta{"beta", U::count, 0, 32, "PIE's weight of the delay trend (tc's units: 0-32)"};
const QueueParam kBytemode{"bytemode", U::flag, 0, 1, "scale the drop probability by packet size"};
const QueueParam kDqRate{"dq_rate_estimator", U::flag, 0, 1,
                         "estimate delay from the dequeue rate (RFC 8033's variant)"};
const QueueParam kMemoryLimit{"memory_limit", U::bytes, 1, kU32, "memory all flow queues may hold"};
const QueueParam kEcnProb{"ecn_prob", U::fraction, 0, 1,
                          "drop probability above which ECN-capable packets are dropped, not marked"};
const QueueParam kPerturb{"perturb", U::duration, 0, 2147483647.0 * kSec,
                          "how often sfq re-seeds its flow hash (0 = never)"};
const QueueParam kDivisor{"divisor", U::count, 1, 65536, "hash table size (a power of two)"};
const QueueParam kSfqFlows{"flows", U::count, 1, 65408, "flow slots"};
const QueueParam kMin{"min", U::bytes, 1, kU32, "average queue size where marking starts"};
const QueueParam kMax{"max", U::bytes, 1, kU32,
                      "average queue size where the marking probability reaches `probability`"};
const QueueParam kAvpkt{"avpkt", U::bytes, 1, 65535, "average packet size"};
const QueueParam kBurst{"burst", U::packets, 1, kU32, "packets a burst may bring before the average follows"};
const QueueParam kProbability{"probability", U::fraction, 0, 1, "marking probability at `max`"};
const QueueParam kBandwidth{"bandwidth", U::rate, 1, kU32 * 8,
                            "link rate for the idle-time average (default: the shaper's rate)"};
const QueueParam kHarddrop{"harddrop", U::flag, 0, 1, "drop above `max` even ECN-capable packets"};
const QueueParam kAdaptive{"adaptive", U::flag, 0, 1,
                           "Adaptive RED: tune `probability` to keep the average between min and max"};
const QueueParam kFlowLimit{"flow_limit", U::packets, 1, kU32, "packets one flow may queue"};
const QueueParam kInitialQuantum{"initial_quantum", U::bytes, 1, kU32, "bytes a new flow may send in its first round"};
const QueueParam kMaxrate{"maxrate", U::rate, 8, kU32 * 8, "pacing cap for each flow"};
const QueueParam kBuckets{"buckets", U::count, 2, 262144, "hash buckets (a power of two)"};
const QueueParam kPacing{"pacing", U::flag, 0, 1, "pace flows at their socket pacing rate (fq's default: on)"};

std::vector<QueueKind> make_kinds() {
    return {
        {Queue::none, "none", U::packets, {}},
        {Queue::pfifo, "pfifo", U::packets, {}},
        {Queue::bfifo, "bfifo", U::bytes, {}},
        {Queue::fq_codel, "fq_codel", U::packets, {&kTarget, &kInterval, &kFlows, &kQuantum, &kEcn, &kCeThreshold}},
        {Queue::cake, "cake", U::packets, {}},
        {Queue::codel, "codel", U::packets, {&kTarget, &kInterval, &kEcn, &kCeThreshold}},
        {Queue::pie, "pie", U::packets, {&kTarget, &kTupdate, &kAlpha, &kBeta, &kEcn, &kBytemode, &kDqRate}},
        {Queue::fq_pie,
         "fq_pie",
         U::packets,
         {&kTarget, &kTupdate, &kFlows, &kQuantum, &kAlpha, &kBeta, &kMemoryLimit, &kEcnProb, &kEcn, &kBytemode,
          &kDqRate}},
        {Queue::sfq, "sfq", U::packets, {&kPerturb, &kQuantum, &kDivisor, &kSfqFlows}},
        {Queue::red,
         "red",
         U::bytes,
         {&kMin, &kMax, &kAvpkt, &kBurst, &kProbability, &kBandwidth, &kEcn, &kHarddrop, &kAdaptive}},
        {Queue::fq, "fq", U::packets, {&kFlowLimit, &kQuantum, &kInitialQuantum, &kMaxrate, &kBuckets, &kPacing}},
    };
}

// A value in base units as a user writes it: "20ms", "50mbit", "2%", "on", "1514".
std::string format_value(const QueueParam& p, double v) {
    switch (p.unit) {
        case U::duration: return units::format_duration(nanoseconds{static_cast<std::int64_t>(v)});
        case U::rate: return units::format_rate(static_cast<std::uint64_t>(v));
        case U::fraction: return units::format_percent(v);
        case U::flag: return v != 0 ? "on" : "off";
        default: return fmt::format("{}", static_cast<std::uint64_t>(v));
    }
}

bool power_of_two(double v) { return v >= 1 && std::has_single_bit(static_cast<std::uint64_t>(v)); }

std::optional<double> read_param(const QueueParam& p, Reader& r) {
    std::optional<double> v;
    switch (p.unit) {
        case U::duration:
            if (auto d = r.duration(p.key)) v = static_cast<double>(d->count());
            break;
        case U::flag:
            if (auto b = r.boolean(p.key)) v = *b ? 1 : 0;
            break;
        case U::rate:
            if (auto x = r.rate(p.key)) v = static_cast<double>(*x);
            break;
        case U::bytes:
            if (auto x = r.size(p.key)) v = static_cast<double>(*x);
            break;
        case U::fraction:
            if (auto x = r.percent(p.key)) v = *x;
            break;
        case U::packets:
        case U::count:
            if (auto x = r.integer(p.key, static_cast<std::int64_t>(p.lo), static_cast<std::int64_t>(p.hi)))
                v = static_cast<double>(*x);
            return v;
    }
    if (!v) return v;
    if (*v < p.lo || *v > p.hi) {
        r.diag().error(r.value_at(p.key),
                       fmt::format("`{}` = {} is out of range: the kernel takes {} to {}", p.key, format_value(p, *v),
                                   format_value(p, p.lo), format_value(p, p.hi)));
        return std::nullopt;
    }
    return v;
}

std::string kind_list() {
    std::string out;
    for (const auto& k : queue_kinds()) out += (out.empty() ? "" : ", ") + std::string(k.name);
    return out;
}

void parse_limit(const Node& n, Direction& d, Diagnostics& diag, std::string_view what) {
    if (queue_kind(d.queue).limit_unit == U::bytes) {
        if (auto v = config::to_size(n, what, diag)) d.queue_limit = *v;
    } else if (auto v = config::to_integer(n, what, 1, static_cast<std::int64_t>(kU32), diag)) {
        d.queue_limit = static_cast<std::uint64_t>(*v);
    }
}

// ---- netlink ------------------------------------------------------------------------------

struct Attr {
    std::uint16_t type;
    std::vector<std::uint8_t> payload;
};

Attr u32(int type, double v) {
    auto x = static_cast<std::uint32_t>(std::clamp(v, 0.0, kU32));
    std::vector<std::uint8_t> b(4);
    std::memcpy(b.data(), &x, 4);
    return {static_cast<std::uint16_t>(type), b};
}

std::vector<std::uint8_t> serialize(const std::vector<Attr>& attrs) {
    std::vector<std::uint8_t> out;
    for (const auto& a : attrs) {
        nlattr h{static_cast<std::uint16_t>(NLA_HDRLEN + a.payload.size()), a.type};
        std::size_t at = out.size();
        out.resize(at + NLA_ALIGN(h.nla_len), 0);
        std::memcpy(out.data() + at, &h, sizeof h);
        std::memcpy(out.data() + at + NLA_HDRLEN, a.payload.data(), a.payload.size());
    }
    return out;
}

// How one parameter travels as a u32 attribute of a nested-attribute kind.
enum class Wire { plain, usec, percent, log2, bytes_per_sec };

struct AttrMap {
    const char* key;
    int type;
    Wire wire;
};

double to_wire_value(Wire w, double v) {
    switch (w) {
        case Wire::usec: return std::round(v / 1e3);
        case Wire::percent: return std::round(v * 100);
        case Wire::log2: return std::log2(v);
        case Wire::bytes_per_sec: return std::floor(v / 8);
        default: return v;
    }
}

double from_wire_value(Wire w, std::uint32_t x) {
    switch (w) {
        case Wire::usec: return static_cast<double>(x) * 1e3;
        case Wire::percent: return static_cast<double>(x) / 100;
        case Wire::log2: return std::ldexp(1.0, static_cast<int>(x));
        case Wire::bytes_per_sec: return static_cast<double>(x) * 8;
        default: return x;
    }
}

// The kinds whose options are nested u32 attributes: which attribute carries each key.
// `limit` is the queue's limit (packets).
const std::vector<AttrMap>* attr_map(Queue q) {
    static const std::vector<AttrMap> codel{{"limit", TCA_CODEL_LIMIT, Wire::plain},
                                            {"target", TCA_CODEL_TARGET, Wire::usec},
                                            {"interval", TCA_CODEL_INTERVAL, Wire::usec},
                                            {"ecn", TCA_CODEL_ECN, Wire::plain},
                                            {"ce_threshold", TCA_CODEL_CE_THRESHOLD, Wire::usec}};
    static const std::vector<AttrMap> fq_codel{{"limit", TCA_FQ_CODEL_LIMIT, Wire::plain},
                                               {"target", TCA_FQ_CODEL_TARGET, Wire::usec},
                                               {"interval", TCA_FQ_CODEL_INTERVAL, Wire::usec},
                                               {"flows", TCA_FQ_CODEL_FLOWS, Wire::plain},
                                               {"quantum", TCA_FQ_CODEL_QUANTUM, Wire::plain},
                                               {"ecn", TCA_FQ_CODEL_ECN, Wire::plain},
                                               {"ce_threshold", TCA_FQ_CODEL_CE_THRESHOLD, Wire::usec}};
    static const std::vector<AttrMap> pie{
        {"limit", TCA_PIE_LIMIT, Wire::plain},       {"target", TCA_PIE_TARGET, Wire::usec},
        {"tupdate", TCA_PIE_TUPDATE, Wire::usec},    {"alpha", TCA_PIE_ALPHA, Wire::plain},
        {"beta", TCA_PIE_BETA, Wire::plain},         {"ecn", TCA_PIE_ECN, Wire::plain},
        {"bytemode", TCA_PIE_BYTEMODE, Wire::plain}, {"dq_rate_estimator", TCA_PIE_DQ_RATE_ESTIMATOR, Wire::plain}};
    static const std::vector<AttrMap> fq_pie{{"limit", TCA_FQ_PIE_LIMIT, Wire::plain},
                                             {"flows", TCA_FQ_PIE_FLOWS, Wire::plain},
                                             {"target", TCA_FQ_PIE_TARGET, Wire::usec},
                                             {"tupdate", TCA_FQ_PIE_TUPDATE, Wire::usec},
                                             {"alpha", TCA_FQ_PIE_ALPHA, Wire::plain},
                                             {"beta", TCA_FQ_PIE_BETA, Wire::plain},
                                             {"quantum", TCA_FQ_PIE_QUANTUM, Wire::plain},
                                             {"memory_limit", TCA_FQ_PIE_MEMORY_LIMIT, Wire::plain},
                                             {"ecn_prob", TCA_FQ_PIE_ECN_PROB, Wire::percent},
                                             {"ecn", TCA_FQ_PIE_ECN, Wire::plain},
                                             {"bytemode", TCA_FQ_PIE_BYTEMODE, Wire::plain},
                                             {"dq_rate_estimator", TCA_FQ_PIE_DQ_RATE_ESTIMATOR, Wire::plain}};
    static const std::vector<AttrMap> fq{{"limit", TCA_FQ_PLIMIT, Wire::plain},
                                         {"flow_limit", TCA_FQ_FLOW_PLIMIT, Wire::plain},
                                         {"quantum", TCA_FQ_QUANTUM, Wire::plain},
                                         {"initial_quantum", TCA_FQ_INITIAL_QUANTUM, Wire::plain},
                                         {"maxrate", TCA_FQ_FLOW_MAX_RATE, Wire::bytes_per_sec},
                                         {"buckets", TCA_FQ_BUCKETS_LOG, Wire::log2},
                                         {"pacing", TCA_FQ_RATE_ENABLE, Wire::plain}};
    switch (q) {
        case Queue::codel: return &codel;
        case Queue::fq_codel: return &fq_codel;
        case Queue::pie: return &pie;
        case Queue::fq_pie: return &fq_pie;
        case Queue::fq: return &fq;
        default: return nullptr;
    }
}

std::optional<double> param(const Direction& d, const char* key) {
    if (std::string_view(key) == "limit") return d.queue_limit ? std::optional<double>(d.queue_limit) : std::nullopt;
    auto it = d.queue_params.find(key);
    if (it == d.queue_params.end()) return std::nullopt;
    return it->second;
}

// sfq's options are tc_sfq_qopt itself (TCA_OPTIONS is not nested); the kernel dumps the
// larger tc_sfq_qopt_v1 that begins with it.
std::vector<std::uint8_t> sfq_options(const Direction& d) {
    // As tc sends it: the v1 struct, with only its v0 part (the parameters above) set.
    tc_sfq_qopt_v1 v1{};
    tc_sfq_qopt& o = v1.v0;
    o.limit = static_cast<std::uint32_t>(d.queue_limit);
    if (auto v = param(d, "quantum")) o.quantum = static_cast<unsigned>(*v);
    // The kernel counts perturb in seconds (x HZ): sub-second values round down to "never".
    if (auto v = param(d, "perturb")) o.perturb_period = static_cast<int>(*v / kSec);
    if (auto v = param(d, "divisor")) o.divisor = static_cast<unsigned>(*v);
    if (auto v = param(d, "flows")) o.flows = static_cast<unsigned>(*v);
    std::vector<std::uint8_t> out(sizeof v1);
    std::memcpy(out.data(), &v1, sizeof v1);
    return out;
}

// red's defaults, as tc red fills them: limit is wanlab's default queue (1000 full frames,
// as bfifo); max a quarter of it; min a third of max; burst from min, max and avpkt.
struct RedValues {
    double limit, min, max, avpkt, burst, probability, bandwidth;
};

RedValues red_values(const Direction& d) {
    RedValues v{};
    v.limit = d.queue_limit ? static_cast<double>(d.queue_limit) : 1000.0 * 1514;
    v.max = param(d, "max").value_or(std::floor(v.limit / 4));
    v.min = param(d, "min").value_or(std::floor(v.max / 3));
    v.avpkt = param(d, "avpkt").value_or(1000);
    v.burst = param(d, "burst").value_or(std::floor((2 * v.min + v.max) / (3 * v.avpkt)));
    v.probability = param(d, "probability").value_or(0.02);
    v.bandwidth = param(d, "bandwidth").value_or(d.rate_bps ? static_cast<double>(d.rate_bps) : 10e6);
    return v;
}

// tc_red_eval_ewma: the smallest Wlog whose average follows a burst of `burst` packets
// arriving on a queue at qmin.
int red_wlog(double qmin, double burst, double avpkt) {
    double w = 0.5;
    double a = burst + 1 - qmin / avpkt;
    if (a < 1.0) return -1;
    for (int wlog = 1; wlog < 32; ++wlog, w /= 2)
        if (a <= (1 - std::pow(1 - w, burst)) / w) return wlog;
    return -1;
}

// tc_red_eval_P: Plog such that 2^-Plog is the probability per byte above qmin.
int red_plog(double qmin, double qmax, double probability) {
    double span = qmax - qmin;
    if (span <= 0) return -1;
    double p = probability / span;
    int i = 0;
    for (; i < 32; ++i) {
        if (p > 1.0) break;
        p *= 2;
    }
    return i >= 32 ? -1 : i;
}

}  // namespace

std::span<const QueueKind> queue_kinds() {
    static const std::vector<QueueKind> kinds = make_kinds();
    return kinds;
}

const QueueKind& queue_kind(Queue q) { return queue_kinds()[static_cast<std::size_t>(q)]; }

std::optional<Queue> queue_named(std::string_view name) {
    for (const auto& k : queue_kinds())
        if (name == k.name) return k.queue;
    return std::nullopt;
}

std::vector<std::string> queue_names() {
    std::vector<std::string> out;
    for (const auto& k : queue_kinds()) out.emplace_back(k.name);
    return out;
}

void parse_queue(Reader& r, Direction& d) {
    const Node* q = r.raw("qdisc");
    if (q) {
        d.at["qdisc"] = r.key_at("qdisc");
        if (q->kind == Node::Kind::table) {
            Reader t(*q, "`qdisc`", r.diag());
            if (!t.has("kind")) {
                r.diag().error(q->value_at, fmt::format("`qdisc` as a table needs `kind`: one of {}", kind_list()));
                for (const auto& m : q->members) t.raw(m.first);
            } else if (auto name = t.choice("kind", queue_names())) {
                d.queue = *queue_named(*name);
                const QueueKind& kind = queue_kind(d.queue);
                if (const Node* lim = t.raw("limit")) parse_limit(*lim, d, r.diag(), "limit");
                for (const QueueParam* p : kind.params)
                    if (auto v = read_param(*p, t)) d.queue_params[p->key] = *v;
                for (const auto& member : q->members) {
                    // Named, not a structured binding: clang 14 cannot capture one in a lambda.
                    const std::string& key = member.first;
                    const Node& value = member.second;
                    bool known = key == "kind" || key == "limit" ||
                                 std::any_of(kind.params.begin(), kind.params.end(),
                                             [&](const QueueParam* p) { return key == p->key; });
                    if (known) continue;
                    std::string takes = "limit";
                    for (const QueueParam* p : kind.params) takes += std::string(", ") + p->key;
                    r.diag().error(value.key_at.line ? value.key_at : value.value_at,
                                   fmt::format("{} takes no `{}`; its parameters: {}", kind.name, key, takes));
                    t.raw(key);
                }
            } else {
                for (const auto& m : q->members) t.raw(m.first);
            }
            t.finish();
        } else if (auto name = q->kind == Node::Kind::value ? q->value->value_exact<std::string>() : std::nullopt;
                   !name) {
            r.diag().error(q->value_at, fmt::format("`qdisc` must be a queue's name or a table with `kind`, not {}",
                                                    config::describe(*q)));
        } else {
            if (auto kind = queue_named(*name)) {
                d.queue = *kind;
            } else {
                auto guess = did_you_mean(*name, queue_names());
                r.diag().error(q->value_at,
                               fmt::format("`qdisc` = \"{}\" is not one of {}{}", *name, kind_list(),
                                           guess.empty() ? "" : fmt::format("; did you mean \"{}\"?", guess)));
            }
        }
    }
    if (const Node* n = r.raw("qdisc_limit")) {
        d.at["qdisc_limit"] = r.key_at("qdisc_limit");
        // Written beside a `qdisc` table in one table, it is an error; a [link.up] that sizes
        // the queue [link] describes as a table is fine, unless the table has its own limit.
        bool table = q && q->kind == Node::Kind::table;
        if (table)
            r.diag().error(r.key_at("qdisc_limit"), "`qdisc_limit` and a `qdisc` table: give `limit` in the table");
        if (!table || !q->find("limit")) parse_limit(*n, d, r.diag(), "qdisc_limit");
    }
}

void validate_queue(const Direction& d, Diagnostics& diag) {
    auto at = [&]() {
        auto it = d.at.find("qdisc");
        return it != d.at.end() ? it->second : Location{};
    };
    auto has = [&](const char* k) { return d.queue_params.count(k) > 0; };
    auto get = [&](const char* k) { return d.queue_params.at(k); };
    if (d.queue == Queue::sfq && has("divisor") && !power_of_two(get("divisor")))
        diag.error(at(), fmt::format("sfq's `divisor` = {} must be a power of two", get("divisor")));
    if (d.queue == Queue::fq && has("buckets") && !power_of_two(get("buckets")))
        diag.error(at(), fmt::format("fq's `buckets` = {} must be a power of two", get("buckets")));
    if (d.queue == Queue::sfq) {
        // sfq holds at most 127 packets per flow slot: a larger limit is cut to that.
        double flows = has("flows") ? get("flows") : 128;
        if (d.queue_limit > 127 * flows)
            diag.error(at(), fmt::format("sfq's limit of {} packets is above what its {} flow slots hold (127 each, "
                                         "{}); raise `flows` or lower the limit",
                                         d.queue_limit, flows, 127 * flows));
        if (d.queue_limit == 1) diag.error(at(), "sfq's limit must be at least 2 packets");
        if (d.queue_limit && has("flows") && get("flows") > static_cast<double>(d.queue_limit))
            diag.error(at(), fmt::format("sfq's `flows` = {} is above its limit of {} packets, which the kernel would "
                                         "cut it to; lower `flows`",
                                         get("flows"), d.queue_limit));
    }
    if (d.queue == Queue::red) {
        RedValues v = red_values(d);
        if (v.limit > kU32)
            diag.error(at(), fmt::format("red's limit of {} bytes is above the 4 GiB its 32-bit field holds", v.limit));
        else if (!(v.min < v.max))
            diag.error(at(), fmt::format("red's `min` ({} bytes) must be below `max` ({} bytes)", v.min, v.max));
        else if (v.max > v.limit)
            diag.error(at(), fmt::format("red's `max` ({} bytes) is above its limit ({} bytes)", v.max, v.limit));
        else if (red_wlog(v.min, v.burst, v.avpkt) < 0)
            diag.error(at(), fmt::format("red's `burst` = {} is too small for `min` = {} bytes at `avpkt` = {}: it "
                                         "needs burst > min / avpkt - 1",
                                         v.burst, v.min, v.avpkt));
        else if (red_plog(v.min, v.max, v.probability) < 0)
            diag.error(at(), "red's `probability` is too small to express between `min` and `max`");
    }
}

RedWire red_wire(const Direction& d, const Psched& psched) {
    RedValues v = red_values(d);
    RedWire w{};
    w.limit = static_cast<std::uint32_t>(v.limit);
    w.qth_min = static_cast<std::uint32_t>(v.min);
    w.qth_max = static_cast<std::uint32_t>(v.max);
    w.wlog = static_cast<std::uint8_t>(std::max(red_wlog(v.min, v.burst, v.avpkt), 0));
    w.plog = static_cast<std::uint8_t>(std::max(red_plog(v.min, v.max, v.probability), 0));
    w.max_p = static_cast<std::uint32_t>(std::min(v.probability * 4294967296.0, kU32));
    // tc_red_eval_idle_damping: how far the average decays per idle period, by cell.
    w.stab.assign(256, 0);
    double xmit_ticks = static_cast<double>(v.avpkt) / (v.bandwidth / 8) * 1e6 * psched.ticks_per_usec;
    double lw = -std::log(1.0 - 1.0 / std::ldexp(1.0, w.wlog)) / xmit_ticks;
    double maxtime = 31 / lw;
    int clog = 0;
    for (; clog < 32; ++clog)
        if (maxtime / std::ldexp(1.0, clog) < 512) break;
    w.scell_log = static_cast<std::uint8_t>(std::min(clog, 31));
    for (int i = 1; i < 255; ++i) {
        double x = std::ldexp(static_cast<double>(i), clog) * lw;
        w.stab[i] = static_cast<std::uint8_t>(std::min(x, 31.0));
    }
    w.stab[255] = 31;
    w.flags = 0;
    if (param(d, "ecn").value_or(0)) w.flags |= TC_RED_ECN;
    if (param(d, "harddrop").value_or(0)) w.flags |= TC_RED_HARDDROP;
    if (param(d, "adaptive").value_or(0)) w.flags |= TC_RED_ADAPTATIVE;
    return w;
}

std::vector<std::uint8_t> queue_options(const Direction& d, const Psched& psched) {
    if (d.queue == Queue::sfq) return sfq_options(d);
    if (d.queue == Queue::red) {
        RedWire w = red_wire(d, psched);
        tc_red_qopt o{};
        o.limit = w.limit;
        o.qth_min = w.qth_min;
        o.qth_max = w.qth_max;
        o.Wlog = w.wlog;
        o.Plog = w.plog;
        o.Scell_log = w.scell_log;
        // The flags travel in the qopt, not in TCA_RED_FLAGS as tc 6.1 sends them: the kernel
        // arms Adaptive RED's timer only for a TC_RED_ADAPTATIVE in the qopt, so tc's
        // `adaptive` is stored but never adapts. (The two places exclude each other.)
        o.flags = w.flags;
        std::vector<std::uint8_t> parms(sizeof o);
        std::memcpy(parms.data(), &o, sizeof o);
        return serialize({{TCA_RED_PARMS, parms}, {TCA_RED_STAB, w.stab}, u32(TCA_RED_MAX_P, w.max_p)});
    }
    if (d.queue == Queue::cake)
        return d.queue_limit ? serialize({u32(TCA_CAKE_MEMORY, queue_size(d))}) : std::vector<std::uint8_t>{};
    const auto* map = attr_map(d.queue);
    if (!map) return {};
    std::vector<Attr> attrs;
    for (const auto& m : *map)
        if (auto v = param(d, m.key)) attrs.push_back(u32(m.type, to_wire_value(m.wire, *v)));
    return serialize(attrs);
}

QueueParams decode_queue(const std::string& kind, const std::vector<std::uint8_t>& options) {
    QueueParams out;
    auto q = queue_named(kind);
    if (!q) return out;
    if (*q == Queue::pfifo || *q == Queue::bfifo) {
        out["limit"] = decode_fifo_limit(options);
        return out;
    }
    if (*q == Queue::sfq) {
        tc_sfq_qopt o{};
        if (options.size() < sizeof o) return out;
        std::memcpy(&o, options.data(), sizeof o);
        out["limit"] = o.limit;
        out["quantum"] = o.quantum;
        out["perturb"] = static_cast<double>(o.perturb_period) * kSec;
        out["divisor"] = o.divisor;
        out["flows"] = o.flows;
        return out;
    }
    auto attrs = parse_attributes(options.data(), options.size());
    auto u32_of = [&](int type) -> std::optional<std::uint32_t> {
        auto it = attrs.find(type);
        if (it == attrs.end() || it->second.size() < 4) return std::nullopt;
        std::uint32_t x;
        std::memcpy(&x, it->second.data(), 4);
        return x;
    };
    if (*q == Queue::red) {
        if (auto it = attrs.find(TCA_RED_PARMS); it != attrs.end() && it->second.size() >= sizeof(tc_red_qopt)) {
            tc_red_qopt o;
            std::memcpy(&o, it->second.data(), sizeof o);
            out["limit"] = o.limit;
            out["min"] = o.qth_min;
            out["max"] = o.qth_max;
            std::uint32_t flags = o.flags;
            if (auto f = attrs.find(TCA_RED_FLAGS); f != attrs.end() && f->second.size() >= sizeof(nla_bitfield32)) {
                nla_bitfield32 b;
                std::memcpy(&b, f->second.data(), sizeof b);
                flags |= b.value;
            }
            out["ecn"] = (flags & TC_RED_ECN) ? 1 : 0;
            out["harddrop"] = (flags & TC_RED_HARDDROP) ? 1 : 0;
            out["adaptive"] = (flags & TC_RED_ADAPTATIVE) ? 1 : 0;
        }
        if (auto p = u32_of(TCA_RED_MAX_P)) out["probability"] = *p / 4294967296.0;
        return out;
    }
    if (*q == Queue::cake) {
        if (auto m = u32_of(TCA_CAKE_MEMORY)) out["limit"] = *m;
        return out;
    }
    if (const auto* map = attr_map(*q))
        for (const auto& m : *map)
            if (auto x = u32_of(m.type)) out[m.key] = from_wire_value(m.wire, *x);
    return out;
}

std::vector<Mismatch> compare_queue(const Direction& asked, const QueueParams& kernel) {
    std::vector<Mismatch> out;
    const QueueKind& kind = queue_kind(asked.queue);
    if (auto want = queue_size(asked); want && asked.queue != Queue::red) {
        auto it = kernel.find("limit");
        double got = it == kernel.end() ? 0 : it->second;
        if (got != want) out.push_back({"qdisc_limit", std::to_string(want), fmt::format("{}", got)});
    }
    for (const QueueParam* p : kind.params) {
        auto a = asked.queue_params.find(p->key);
        if (a == asked.queue_params.end()) continue;
        // red dumps only its thresholds, flags and max_P; avpkt, burst and bandwidth shape
        // Wlog, Plog and the idle table, which it does not show. Adaptive RED moves max_P.
        // min and max are checked below with the limit, defaults resolved.
        std::string_view key = p->key;
        if (asked.queue == Queue::red &&
            (key == "avpkt" || key == "burst" || key == "bandwidth" || key == "min" || key == "max" ||
             (key == "probability" && asked.queue_params.count("adaptive") && asked.queue_params.at("adaptive"))))
            continue;
        auto k = kernel.find(p->key);
        double want = a->second, got = k == kernel.end() ? -1 : k->second;
        bool same = got == want;
        if (p->unit == U::duration && key == "tupdate")
            same = got >= want - 1e3 && got < want + 10e6;  // kept in jiffies: up to one tick (HZ >= 100) up
        else if (p->unit == U::duration && key == "perturb")
            same = got == std::floor(want / kSec) * kSec;
        else if (p->unit == U::duration)
            same = std::fabs(got - want) <= 2e3;  // usec on the wire, codel's 1024 ns clock
        else if (p->unit == U::fraction)
            same = std::fabs(got - want) <= 1e-6 ||
                   (key == "ecn_prob" && std::fabs(got - std::round(want * 100) / 100) < 1e-9);
        else if (p->unit == U::rate)
            same = std::floor(got / 8) == std::floor(want / 8);
        if (!same) out.push_back({p->key, format_value(*p, want), k == kernel.end() ? "none" : format_value(*p, got)});
    }
    if (asked.queue == Queue::red) {
        RedValues v = red_values(asked);
        auto check = [&](const char* key, double want) {
            auto k = kernel.find(key);
            if (k == kernel.end() || k->second != want)
                out.push_back({fmt::format("red {}", key), fmt::format("{}", want),
                               k == kernel.end() ? "none" : fmt::format("{}", k->second)});
        };
        check("limit", v.limit);
        check("min", v.min);
        check("max", v.max);
    }
    return out;
}

std::string queue_tc_arguments(const Direction& d) {
    std::string out;
    if (d.queue == Queue::red) {
        RedValues v = red_values(d);
        out +=
            fmt::format(" limit {} min {} max {} avpkt {} burst {} probability {} bandwidth {}", v.limit, v.min, v.max,
                        v.avpkt, v.burst, v.probability, units::format_rate(static_cast<std::uint64_t>(v.bandwidth)));
        for (const char* f : {"ecn", "harddrop", "adaptive"})
            if (param(d, f).value_or(0)) out += fmt::format(" {}", f);
        return out;
    }
    if (d.queue_limit) {
        if (d.queue == Queue::cake)
            out += fmt::format(" memlimit {}", queue_size(d));
        else
            out += fmt::format(" limit {}", d.queue_limit);
    }
    for (const QueueParam* p : queue_kind(d.queue).params) {
        auto v = param(d, p->key);
        if (!v) continue;
        std::string_view key = p->key;
        switch (p->unit) {
            case U::flag:
                // tc's words: ecn / noecn, pacing / nopacing, bytemode / nobytemode,
                // dq_rate_estimator / no_dq_rate_estimator.
                if (key == "dq_rate_estimator")
                    out += *v ? " dq_rate_estimator" : " no_dq_rate_estimator";
                else
                    out += fmt::format(" {}{}", *v ? "" : "no", key);
                break;
            case U::duration:
                if (key == "perturb")
                    out += fmt::format(" perturb {}", static_cast<std::int64_t>(*v / kSec));
                else
                    out +=
                        fmt::format(" {} {}", key, units::format_duration(nanoseconds{static_cast<std::int64_t>(*v)}));
                break;
            case U::rate: out += fmt::format(" {} {}", key, units::format_rate(static_cast<std::uint64_t>(*v))); break;
            case U::fraction: out += fmt::format(" {} {}", key, std::lround(*v * 100)); break;
            default: out += fmt::format(" {} {}", key, static_cast<std::uint64_t>(*v));
        }
    }
    return out;
}

std::vector<std::pair<std::string, double>> queue_param_list(const Direction& d) {
    std::vector<std::pair<std::string, double>> out;
    for (const QueueParam* p : queue_kind(d.queue).params)
        if (auto v = param(d, p->key)) out.emplace_back(p->key, *v);
    return out;
}

}  // namespace wanlab::netem
