#include "netem/link_spec.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "core/units.h"

namespace wanlab::netem {
namespace {

using config::Node;
using config::Reader;
using std::chrono::nanoseconds;

// netem's qopt carries delay and jitter as u32 psched ticks of 64 ns (see dependency notes):
// anything longer wraps. The kernel also caps jitter at INT_MAX ns.
constexpr nanoseconds kMaxDelay{std::chrono::seconds(274)};  // 2^32 ticks of 64 ns = 274.9 s
constexpr nanoseconds kMaxJitter{std::numeric_limits<std::int32_t>::max()};
constexpr std::int64_t kU32Max = std::numeric_limits<std::uint32_t>::max();
constexpr std::int64_t kS32Max = std::numeric_limits<std::int32_t>::max();
constexpr std::int64_t kS32Min = std::numeric_limits<std::int32_t>::min();

const std::vector<std::string> kDistributions{"normal", "pareto", "paretonormal", "experimental", "uniform"};
const std::vector<std::string> kShapers{"netem", "tbf", "htb"};
const std::vector<std::string> kQueues{"none", "pfifo", "bfifo", "fq_codel", "cake"};
const std::vector<std::string> kLossModels{"random", "gemodel", "state"};

void note(Direction& d, Reader& r, std::string_view key) {
    if (r.has(key)) d.at[std::string(key)] = r.key_at(key);
}

void bounded_duration(Reader& r, std::string_view key, nanoseconds max, nanoseconds& out, Direction& d) {
    auto v = r.duration(key);
    if (!v) return;
    note(d, r, key);
    if (*v > max) {
        r.diag().error(r.value_at(key), fmt::format("`{}` = {} is above the most netem can express ({})", key,
                                                    units::format_duration(*v), units::format_duration(max)));
        return;
    }
    out = *v;
}

void percent(Reader& r, std::string_view key, double& out, Direction& d) {
    if (auto v = r.percent(key)) {
        out = *v;
        note(d, r, key);
    }
}

void parse_loss_table(const Node& t, Loss& loss, Diagnostics& diag) {
    Reader r(t, "`loss`", diag);
    auto model = r.choice("model", kLossModels);
    if (!r.has("model"))
        diag.error(t.value_at, "`loss` as a table needs `model`: \"random\", \"gemodel\" or \"state\"");
    auto get = [&](std::string_view key, double& out) {
        if (auto v = r.percent(key)) out = *v;
    };
    if (model == "random") {
        loss.model = Loss::Model::random;
        get("p", loss.probability);
        get("correlation", loss.correlation);
    } else if (model == "gemodel") {
        // tc: loss gemodel p [r [1-h [1-k]]]; r defaults to 1-p, 1-h to 100%, 1-k to 0%.
        loss.model = Loss::Model::gemodel;
        get("p", loss.probability);
        loss.r = 1.0 - loss.probability;
        loss.one_minus_h = 1.0;
        get("r", loss.r);
        get("1-h", loss.one_minus_h);
        get("1-k", loss.one_minus_k);
    } else if (model == "state") {
        // tc: loss state p13 [p31 [p32 [p23 [p14]]]]; p31 defaults to 1-p13, p23 to 100%.
        loss.model = Loss::Model::state;
        get("p13", loss.probability);
        loss.r = 1.0 - loss.probability;
        loss.one_minus_k = 1.0;
        get("p31", loss.r);
        get("p32", loss.one_minus_h);
        get("p23", loss.one_minus_k);
        get("p14", loss.p14);
    }
    if (model && !r.has(model == "state" ? "p13" : "p"))
        diag.error(t.value_at, fmt::format("`loss` model \"{}\" needs `{}`", *model, model == "state" ? "p13" : "p"));
    // Without a valid model the other keys cannot be judged: say nothing about them.
    if (!model)
        for (const auto& m : t.members) r.raw(m.first);
    r.finish();
}

void parse_loss(Reader& r, Direction& d) {
    Loss& loss = d.netem.loss;
    if (const Node* n = r.raw("loss")) {
        note(d, r, "loss");
        if (n->kind == Node::Kind::table) {
            parse_loss_table(*n, loss, r.diag());
        } else if (auto p = config::to_percent(*n, "loss", r.diag())) {
            loss.model = Loss::Model::random;
            loss.probability = *p;
        }
    }
    if (auto c = r.percent("loss_correlation")) {
        note(d, r, "loss_correlation");
        loss.correlation = *c;
    }
}

void parse_slot(Reader& r, Direction& d) {
    const Node* t = r.table("slot");
    if (!t) return;
    note(d, r, "slot");
    Reader s(*t, "`slot`", r.diag());
    Slot slot;
    if (auto v = s.duration("min_delay")) slot.min_delay = *v;
    slot.max_delay = slot.min_delay;
    if (auto v = s.duration("max_delay")) slot.max_delay = *v;
    if (auto v = s.choice("distribution", {"normal", "pareto", "paretonormal", "experimental"})) slot.distribution = *v;
    if (auto v = s.duration("delay")) slot.dist_delay = *v;
    if (auto v = s.duration("jitter")) slot.dist_jitter = *v;
    if (auto v = s.integer("packets", 0, kS32Max)) slot.packets = static_cast<std::uint32_t>(*v);
    if (auto v = s.integer("bytes", 0, kS32Max)) slot.bytes = static_cast<std::uint32_t>(*v);
    if (slot.max_delay < slot.min_delay)
        r.diag().error(s.key_at("max_delay"), "`slot.max_delay` is below `slot.min_delay`");
    if (!slot.distribution.empty() && s.has("min_delay"))
        r.diag().error(s.key_at("distribution"),
                       "`slot.distribution` and `slot.min_delay` exclude each other: a slot is either "
                       "min_delay/max_delay or distribution/delay/jitter, as in tc");
    if (slot.distribution.empty() && !s.has("min_delay"))
        r.diag().error(t->value_at, "`slot` needs `min_delay` (or `distribution` with `delay` and `jitter`)");
    s.finish();
    d.netem.slot = slot;
}

void parse_limit(Reader& r, Direction& d) {
    const Node* n = r.raw("limit");
    if (!n) return;
    note(d, r, "limit");
    if (n->kind == Node::Kind::value && n->value->value_exact<std::string>() == std::optional<std::string>("auto"))
        return;
    if (n->kind == Node::Kind::value && n->value->is_integer()) {
        if (auto v = config::to_integer(*n, "limit", 1, kU32Max, r.diag()))
            d.netem.limit = static_cast<std::uint32_t>(*v);
        return;
    }
    r.diag().error(n->value_at,
                   fmt::format("`limit` must be \"auto\" or a number of packets, not {}", config::describe(*n)));
}

void parse_shaping(Reader& r, Direction& d) {
    if (auto rate = r.rate("rate")) {
        d.rate_bps = *rate;
        note(d, r, "rate");
    }
    if (auto v = r.integer("packet_overhead", kS32Min, kS32Max)) {
        d.netem.packet_overhead = static_cast<std::int32_t>(*v);
        note(d, r, "packet_overhead");
    }
    if (auto v = r.integer("cell_size", 0, kU32Max)) {
        d.netem.cell_size = static_cast<std::uint32_t>(*v);
        note(d, r, "cell_size");
    }
    if (auto v = r.integer("cell_overhead", kS32Min, kS32Max)) {
        d.netem.cell_overhead = static_cast<std::int32_t>(*v);
        note(d, r, "cell_overhead");
    }
    if (auto s = r.choice("shaper", kShapers)) {
        note(d, r, "shaper");
        d.shaper = *s == "tbf" ? Shaper::tbf : *s == "htb" ? Shaper::htb : Shaper::netem;
    }
    if (auto q = r.choice("qdisc", kQueues)) {
        note(d, r, "qdisc");
        auto it = std::find(kQueues.begin(), kQueues.end(), *q);
        d.queue = static_cast<Queue>(it - kQueues.begin());
    }
    if (const Node* n = r.raw("qdisc_limit")) {
        note(d, r, "qdisc_limit");
        if (d.queue == Queue::bfifo) {
            if (auto v = config::to_size(*n, "qdisc_limit", r.diag())) d.queue_limit = *v;
        } else if (auto v = config::to_integer(*n, "qdisc_limit", 1, kU32Max, r.diag())) {
            d.queue_limit = static_cast<std::uint64_t>(*v);
        }
    }
    if (d.shaper == Shaper::netem) d.netem.rate_bps = d.rate_bps;
}

// Every per-direction key. Called on the merged direction table for values, and on each
// written table (link, up, down) to learn which keys exist.
void parse_fields(Reader& r, Direction& d) {
    Netem& n = d.netem;
    bounded_duration(r, "delay", kMaxDelay, n.delay, d);
    bounded_duration(r, "jitter", kMaxJitter, n.jitter, d);
    percent(r, "correlation", n.delay_correlation, d);
    if (const Node* dist = r.raw("distribution")) {
        note(d, r, "distribution");
        if (auto s = dist->kind == Node::Kind::value ? dist->value->value_exact<std::string>() : std::nullopt) {
            bool path = s->find('/') != std::string::npos || s->ends_with(".dist");
            if (!path && std::find(kDistributions.begin(), kDistributions.end(), *s) == kDistributions.end()) {
                auto guess = did_you_mean(*s, kDistributions);
                r.diag().error(dist->value_at,
                               fmt::format("`distribution` = \"{}\" is not one of normal, pareto, paretonormal, "
                                           "experimental, uniform, nor a path to a .dist table{}",
                                           *s, guess.empty() ? "" : fmt::format("; did you mean \"{}\"?", guess)));
            } else {
                n.distribution = *s == "uniform" ? "" : *s;
            }
        } else {
            r.diag().error(dist->value_at,
                           fmt::format("`distribution` must be a string, not {}", config::describe(*dist)));
        }
    }
    parse_loss(r, d);
    percent(r, "duplicate", n.duplicate, d);
    percent(r, "duplicate_correlation", n.duplicate_correlation, d);
    percent(r, "reorder", n.reorder, d);
    percent(r, "reorder_correlation", n.reorder_correlation, d);
    if (auto g = r.integer("gap", 1, kU32Max)) {
        n.gap = static_cast<std::uint32_t>(*g);
        note(d, r, "gap");
    }
    percent(r, "corrupt", n.corrupt, d);
    percent(r, "corrupt_correlation", n.corrupt_correlation, d);
    // tc sends gap 1 when reordering without a gap; with gap 0 the kernel reorders nothing.
    if (n.reorder > 0 && n.gap == 0) n.gap = 1;
    parse_shaping(r, d);
    parse_slot(r, d);
    if (auto e = r.boolean("ecn")) {
        n.ecn = *e;
        note(d, r, "ecn");
    }
    parse_limit(r, d);
}

// Reads one written table ([link], [link.up] or [link.down]) on its own, reporting every
// error in it under its own name (unknown keys, bad values), without keeping values.
void check_keys(const Node& table, const std::string& section, Diagnostics& diag, bool link_level) {
    Diagnostics scratch;
    Reader r(table, section, scratch);
    Direction ignored;
    parse_fields(r, ignored);
    if (link_level) {
        r.raw("rtt");
        r.raw("profile");
        r.raw("up");
        r.raw("down");
    }
    r.finish();
    for (const auto& d : scratch.items()) {
        if (d.severity == Severity::error)
            diag.error(d.where, d.message, d.note);
        else
            diag.warning(d.where, d.message, d.note);
    }
}

Direction resolve_direction(const Node& link, const char* name, std::optional<nanoseconds> half_rtt,
                            Diagnostics& diag) {
    Node merged;
    merged.kind = Node::Kind::table;
    merged.value_at = link.value_at;
    for (const auto& [key, value] : link.members)
        if (key != "up" && key != "down" && key != "rtt" && key != "profile") merged.members.emplace_back(key, value);
    Direction d;
    if (half_rtt) {
        d.netem.delay = *half_rtt;
        if (const Node* rtt = link.find("rtt")) d.at["delay"] = rtt->key_at;
    }
    if (const Node* over = link.find(name); over && over->is_table()) config::merge(merged, *over);
    // Every problem in these keys was reported by check_keys() against the table it was
    // written in; the merged view only resolves values.
    Diagnostics already_reported;
    Reader r(merged, fmt::format("[link.{}]", name), already_reported);
    parse_fields(r, d);
    (void)diag;
    return d;
}

}  // namespace

bool Direction::impaired() const {
    const Netem& n = netem;
    return n.delay.count() || n.jitter.count() || n.loss.model != Loss::Model::none || n.duplicate > 0 ||
           n.reorder > 0 || n.corrupt > 0 || rate_bps || n.slot || queue != Queue::none;
}

std::uint32_t queue_size(const Direction& d) {
    std::uint64_t n = d.queue == Queue::cake ? d.queue_limit * kCakeBytesPerPacket : d.queue_limit;
    return static_cast<std::uint32_t>(std::min<std::uint64_t>(n, UINT32_MAX));
}

const char* to_string(Shaper s) {
    switch (s) {
        case Shaper::tbf: return "tbf";
        case Shaper::htb: return "htb";
        default: return "netem";
    }
}

const char* to_string(Queue q) {
    switch (q) {
        case Queue::pfifo: return "pfifo";
        case Queue::bfifo: return "bfifo";
        case Queue::fq_codel: return "fq_codel";
        case Queue::cake: return "cake";
        default: return "none";
    }
}

const char* to_string(Loss::Model m) {
    switch (m) {
        case Loss::Model::random: return "random";
        case Loss::Model::gemodel: return "gemodel";
        case Loss::Model::state: return "state";
        default: return "none";
    }
}

LinkSpec parse_link(const Node& link, Diagnostics& diag) {
    check_keys(link, "[link]", diag, true);
    Reader r(link, "[link]", diag);
    const Node* up = r.table("up");
    const Node* down = r.table("down");
    if (up) check_keys(*up, "[link.up]", diag, false);
    if (down) check_keys(*down, "[link.down]", diag, false);
    std::optional<nanoseconds> half_rtt;
    if (auto rtt = r.duration("rtt")) {
        half_rtt = *rtt / 2;
        if (link.find("delay"))
            diag.error(r.key_at("rtt"),
                       "`rtt` and `delay` are both set in [link]: `rtt` is split into a delay of rtt/2 "
                       "each way; set one of them (or `delay` in [link.up] / [link.down])");
        if (*rtt > 2 * kMaxDelay) diag.error(r.value_at("rtt"), "`rtt` is above the most netem can express");
    }
    LinkSpec spec;
    spec.up = resolve_direction(link, "up", half_rtt, diag);
    spec.down = resolve_direction(link, "down", half_rtt, diag);
    return spec;
}

namespace {
// A key set without the key it depends on. The message names no direction, so a [link]-level
// key missing its base in both directions is reported once; the location says where.
void needs(const Direction& d, const char* key, bool base_present, const char* base, const std::string& why,
           Diagnostics& diag, const char*) {
    auto it = d.at.find(key);
    if (it == d.at.end() || base_present) return;
    diag.error(it->second, fmt::format("`{}` needs `{}`: {}", key, base, why));
}

void validate_direction(const Direction& d, const char* dir, Diagnostics& diag) {
    const Netem& n = d.netem;
    needs(d, "jitter", n.delay.count() > 0, "delay", "netem varies the delay around a mean, so set one", diag, dir);
    needs(d, "correlation", n.jitter.count() > 0, "jitter", "the delay correlation applies to the jitter", diag, dir);
    needs(d, "distribution", n.jitter.count() > 0, "jitter", "a distribution shapes the jitter", diag, dir);
    needs(d, "reorder", n.delay.count() > 0, "delay",
          "netem reorders by sending some packets at once while the rest wait out the delay", diag, dir);
    needs(d, "gap", n.reorder > 0, "reorder", "`gap` spaces the reordered packets", diag, dir);
    needs(d, "reorder_correlation", n.reorder > 0, "reorder", "it correlates the reordering", diag, dir);
    needs(d, "loss_correlation", n.loss.model == Loss::Model::random, "loss",
          "it correlates random loss (Gilbert-Elliott and state models carry their own)", diag, dir);
    needs(d, "duplicate_correlation", n.duplicate > 0, "duplicate", "it correlates duplication", diag, dir);
    needs(d, "corrupt_correlation", n.corrupt > 0, "corrupt", "it correlates corruption", diag, dir);
    needs(d, "ecn", !n.ecn || n.loss.model != Loss::Model::none, "loss", "ECN marks the packets loss would drop", diag,
          dir);
    const char* rate_why = "the overheads adjust how netem's rate counts packet sizes";
    needs(d, "packet_overhead", d.rate_bps > 0, "rate", rate_why, diag, dir);
    needs(d, "cell_size", d.rate_bps > 0, "rate", rate_why, diag, dir);
    if (d.rate_bps > 0 && d.shaper != Shaper::netem)
        for (const char* key : {"packet_overhead", "cell_size", "cell_overhead"})
            if (auto it = d.at.find(key); it != d.at.end())
                diag.error(it->second, fmt::format("`{}` needs `shaper` = \"netem\": only netem's own rate counts "
                                                   "overheads, {} does not",
                                                   key, to_string(d.shaper)));
    needs(d, "cell_overhead", n.cell_size > 0, "cell_size", "it is added to each cell", diag, dir);
    needs(d, "shaper", d.rate_bps > 0, "rate", "a shaper limits the rate", diag, dir);
    needs(d, "qdisc", d.queue == Queue::none || d.rate_bps > 0, "rate",
          "the bottleneck queue only fills behind a rate limit", diag, dir);
    needs(d, "qdisc_limit", d.queue != Queue::none, "qdisc", "it sizes the bottleneck queue", diag, dir);
    if (d.queue != Queue::none && d.rate_bps > 0 && d.shaper == Shaper::netem) {
        auto it = d.at.find("qdisc");
        diag.error(it != d.at.end() ? it->second : Location{},
                   fmt::format("`qdisc` = \"{}\" needs `shaper` = \"tbf\" or \"htb\": netem's own rate has no "
                               "separate queue to replace",
                               to_string(d.queue)));
        (void)dir;
    }
    if (d.queue == Queue::cake && d.queue_limit > UINT32_MAX / kCakeBytesPerPacket) {
        auto it = d.at.find("qdisc_limit");
        diag.error(it != d.at.end() ? it->second : Location{},
                   fmt::format("`qdisc_limit` = {} is too large for cake: its memlimit (packets x {} bytes) is a "
                               "32-bit byte count, so at most {} packets",
                               d.queue_limit, kCakeBytesPerPacket, UINT32_MAX / kCakeBytesPerPacket));
    }
}
}  // namespace

void validate_link(const LinkSpec& link, Diagnostics& diag) {
    validate_direction(link.up, "up", diag);
    validate_direction(link.down, "down", diag);
}

std::uint32_t auto_limit(std::uint64_t rate_bps, nanoseconds delay, nanoseconds jitter, std::uint32_t mtu) {
    long double seconds = static_cast<long double>((delay + jitter).count()) / 1e9L;
    long double packets = static_cast<long double>(rate_bps) / 8.0L * seconds / std::max<std::uint32_t>(mtu, 1);
    long double with_headroom = std::ceil(packets * 1.5L);
    if (with_headroom > static_cast<long double>(kU32Max)) return static_cast<std::uint32_t>(kU32Max);
    return std::max<std::uint32_t>(1000, static_cast<std::uint32_t>(with_headroom));
}

void resolve_limit(Direction& dir, std::uint64_t line_rate_bps, std::uint32_t mtu, Diagnostics& diag) {
    std::uint64_t rate = dir.rate_bps ? dir.rate_bps : line_rate_bps;
    Netem& n = dir.netem;
    std::uint32_t needed = auto_limit(rate, n.delay, n.jitter, mtu);
    if (!n.limit) {
        n.limit_packets = needed;
        return;
    }
    n.limit_packets = *n.limit;
    std::uint32_t bdp = static_cast<std::uint32_t>(std::ceil(needed / 1.5));
    if (*n.limit < bdp && (n.delay.count() || n.jitter.count())) {
        auto it = dir.at.find("limit");
        double cap_bps =
            static_cast<double>(*n.limit) * mtu * 8.0 / (static_cast<double>((n.delay + n.jitter).count()) / 1e9);
        diag.warning(it != dir.at.end() ? it->second : Location{},
                     fmt::format("`limit` = {} packets is below the bandwidth-delay product of {} packets "
                                 "({} x {}): netem will drop packets and cap throughput near {}",
                                 *n.limit, bdp, units::format_rate(rate), units::format_duration(n.delay + n.jitter),
                                 units::format_rate(static_cast<std::uint64_t>(cap_bps))),
                     "leave `limit` at \"auto\" unless the drops are what you want to study");
    }
}

}  // namespace wanlab::netem
