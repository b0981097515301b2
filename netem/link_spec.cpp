#include "netem/link_spec.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "core/units.h"
#include "netem/attributes.h"
#include "netem/queue.h"

namespace wanlab::netem {
namespace {

using config::Node;
using config::Reader;
using std::chrono::nanoseconds;

constexpr std::int64_t kU32Max = std::numeric_limits<std::uint32_t>::max();

// Every per-direction key, row by row (netem/attributes.h). Called on the merged direction
// table for values, and on each written table (link, up, down) to learn which keys exist.
void parse_fields(Reader& r, Direction& d) {
    for (const auto& a : attributes()) a.parse(a, r, d);
    Netem& n = d.netem;
    // tc sends gap 1 when reordering without a gap; with gap 0 the kernel reorders nothing.
    if (n.reorder > 0 && n.gap == 0) n.gap = 1;
    if (d.shaper == Shaper::netem) n.rate_bps = d.rate_bps;
}

// Reads one written table ([link], [link.up] or [link.down]) on its own, reporting every
// error in it under its own name (unknown keys, bad values), without keeping values.
}  // namespace

void check_link_keys(const Node& table, const std::string& section, Diagnostics& diag, bool link_level) {
    Diagnostics scratch;
    Reader r(table, section, scratch);
    Direction ignored;
    parse_fields(r, ignored);
    // A trace is read with the schedule (netem/schedule.cpp), for both directions or each.
    r.raw("trace");
    r.raw("trace_window");
    if (link_level) {
        r.raw("rtt");
        r.raw("profile");
        r.raw("up");
        r.raw("down");
        r.raw("schedule");
    }
    r.finish();
    for (const auto& d : scratch.items()) {
        if (d.severity == Severity::error)
            diag.error(d.where, d.message, d.note);
        else
            diag.warning(d.where, d.message, d.note);
    }
}

namespace {

Direction resolve_direction(const Node& link, const char* name, std::optional<nanoseconds> half_rtt,
                            Diagnostics& diag) {
    Node merged;
    merged.kind = Node::Kind::table;
    merged.value_at = link.value_at;
    for (const auto& [key, value] : link.members)
        if (key != "up" && key != "down" && key != "rtt" && key != "profile" && key != "schedule" && key != "trace" &&
            key != "trace_window")
            merged.members.emplace_back(key, value);
    Direction d;
    if (half_rtt) d.netem.delay = *half_rtt;
    // Written, valid or not: a check that depends on the delay looks there first.
    if (const Node* rtt = link.find("rtt")) d.at["delay"] = rtt->key_at;
    if (const Node* over = link.find(name); over && over->is_table()) config::merge(merged, *over);
    if (const Node* trace = merged.find("trace")) d.at["trace"] = trace->value_at;
    // Every problem in these keys was reported by check_link_keys() against the table it was
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
           n.reorder > 0 || n.corrupt > 0 || rate_bps || n.slot || queue != Queue::none || scheduled;
}

std::uint64_t seed_for(std::uint64_t run_seed, const std::string& trial_id, const char* direction) {
    // FNV-1a over the trial and direction, mixed with the run's seed by splitmix64.
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (char c : trial_id + "/" + direction) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
    std::uint64_t z = run_seed + 0x9e3779b97f4a7c15ull * (h | 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

std::uint64_t tbf_burst(std::uint64_t rate_bps, std::uint32_t mtu) {
    return std::max<std::uint64_t>(rate_bps / 8 * kTbfBurstTime.count() / 1000, 2ull * (mtu + 14));
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

const char* to_string(Queue q) { return queue_kind(q).name; }

const char* to_string(Loss::Model m) {
    switch (m) {
        case Loss::Model::random: return "random";
        case Loss::Model::gemodel: return "gemodel";
        case Loss::Model::state: return "state";
        default: return "none";
    }
}

LinkSpec parse_link(const Node& link, Diagnostics& diag) {
    check_link_keys(link, "[link]", diag, true);
    Reader r(link, "[link]", diag);
    const Node* up = r.table("up");
    const Node* down = r.table("down");
    if (up) check_link_keys(*up, "[link.up]", diag, false);
    if (down) check_link_keys(*down, "[link.down]", diag, false);
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
    // The base was written but refused (`rtt = "abc"`): that error is the one to fix.
    if (auto b = d.at.find(base); b != d.at.end() && diag.reported_on_line(b->second)) return;
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
    // A trace's rates come with the schedule (netem/schedule.cpp checks there is one from 0).
    const bool traced = d.at.count("trace") > 0;
    needs(d, "shaper", d.rate_bps > 0 || traced, "rate", "a shaper limits the rate", diag, dir);
    // libnl's tbf takes its rate in bytes/s as an int (encode.cpp): the limit is found here,
    // before anything changes, not when the trial's tree is sent.
    if (d.shaper == Shaper::tbf && d.rate_bps / 8 > static_cast<std::uint64_t>(std::numeric_limits<int>::max())) {
        auto it = d.at.find("rate");
        diag.error(it != d.at.end() ? it->second : Location{},
                   fmt::format("`rate` = {} is above what shaper = \"tbf\" takes (17gbit, through libnl): use shaper "
                               "= \"htb\", or netem's own rate",
                               units::format_rate(d.rate_bps)));
    }
    needs(d, "qdisc", d.queue == Queue::none || d.rate_bps > 0 || traced, "rate",
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
    if (d.queue != Queue::none) validate_queue(d, diag);
}
}  // namespace

void validate_link(const LinkSpec& link, Diagnostics& diag) {
    validate_direction(link.up, "up", diag);
    validate_direction(link.down, "down", diag);
}

namespace {
/// Full-size packets in flight over `delay + jitter` at `rate_bps` (what netem's queue holds).
long double packets_in_flight(std::uint64_t rate_bps, nanoseconds delay, nanoseconds jitter, std::uint32_t mtu) {
    long double seconds = static_cast<long double>((delay + jitter).count()) / 1e9L;
    return static_cast<long double>(rate_bps) / 8.0L * seconds / std::max<std::uint32_t>(mtu, 1);
}
}  // namespace

std::uint32_t auto_limit(std::uint64_t rate_bps, nanoseconds delay, nanoseconds jitter, std::uint32_t mtu) {
    long double with_headroom = std::ceil(packets_in_flight(rate_bps, delay, jitter, mtu) * 1.5L);
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
    // The product itself, not auto_limit()'s (which never goes below tc's 1000 packets).
    long double bdp_exact = std::ceil(packets_in_flight(rate, n.delay, n.jitter, mtu));
    auto bdp = static_cast<std::uint32_t>(std::min<long double>(bdp_exact, kU32Max));
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
