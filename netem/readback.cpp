#include "netem/readback.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include <fmt/format.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>

#include "core/units.h"

namespace wanlab::netem {
namespace {

using Attrs = std::map<int, std::vector<std::uint8_t>>;

Attrs parse_attrs(const std::uint8_t* p, std::size_t size) {
    Attrs out;
    std::size_t off = 0;
    while (off + NLA_HDRLEN <= size) {
        nlattr a;
        std::memcpy(&a, p + off, sizeof a);
        if (a.nla_len < NLA_HDRLEN || off + a.nla_len > size) break;
        out[a.nla_type & NLA_TYPE_MASK].assign(p + off + NLA_HDRLEN, p + off + a.nla_len);
        off += NLA_ALIGN(a.nla_len);
    }
    return out;
}

template <class T>
bool read(const Attrs& a, int type, T& out) {
    auto it = a.find(type);
    if (it == a.end() || it->second.size() < sizeof(T)) return false;
    std::memcpy(&out, it->second.data(), sizeof(T));
    return true;
}

double fraction(std::uint32_t p) { return static_cast<double>(p) / UINT32_MAX; }

void probability_field(std::vector<Mismatch>& out, const char* field, double asked, double kernel) {
    if (probability(asked) != probability(kernel))
        out.push_back({field, units::format_percent(asked), units::format_percent(kernel)});
}

void duration_field(std::vector<Mismatch>& out, const char* field, std::chrono::nanoseconds asked,
                    std::chrono::nanoseconds kernel) {
    // qopt carries 64 ns ticks: anything within one tick is the same setting.
    if (std::llabs((asked - kernel).count()) > 64)
        out.push_back({field, units::format_duration(asked), units::format_duration(kernel)});
}

template <class T>
void exact_field(std::vector<Mismatch>& out, const char* field, T asked, T kernel) {
    if (asked != kernel) out.push_back({field, fmt::format("{}", asked), fmt::format("{}", kernel)});
}

}  // namespace

Netem decode_netem(const std::vector<std::uint8_t>& options, const Psched& psched) {
    Netem n;
    if (options.size() < sizeof(tc_netem_qopt)) return n;
    tc_netem_qopt q;
    std::memcpy(&q, options.data(), sizeof q);
    auto ticks_to_ns = [&](std::uint32_t t) {
        return std::chrono::nanoseconds{static_cast<std::int64_t>(std::llround(t / psched.ticks_per_usec * 1000.0))};
    };
    n.delay = ticks_to_ns(q.latency);
    n.jitter = ticks_to_ns(q.jitter);
    n.limit_packets = q.limit;
    n.limit = q.limit;
    n.gap = q.gap;
    n.duplicate = fraction(q.duplicate);
    if (q.loss) {
        n.loss.model = Loss::Model::random;
        n.loss.probability = fraction(q.loss);
    }
    std::size_t start = NLA_ALIGN(sizeof(tc_netem_qopt));
    Attrs a = start < options.size() ? parse_attrs(options.data() + start, options.size() - start) : Attrs{};
    std::int64_t ns;
    if (read(a, TCA_NETEM_LATENCY64, ns)) n.delay = std::chrono::nanoseconds{ns};
    if (read(a, TCA_NETEM_JITTER64, ns)) n.jitter = std::chrono::nanoseconds{ns};
    tc_netem_corr corr{};
    if (read(a, TCA_NETEM_CORR, corr)) {
        n.delay_correlation = fraction(corr.delay_corr);
        n.loss.correlation = fraction(corr.loss_corr);
        n.duplicate_correlation = fraction(corr.dup_corr);
    }
    tc_netem_reorder reorder{};
    if (read(a, TCA_NETEM_REORDER, reorder)) {
        n.reorder = fraction(reorder.probability);
        n.reorder_correlation = fraction(reorder.correlation);
    }
    tc_netem_corrupt corrupt{};
    if (read(a, TCA_NETEM_CORRUPT, corrupt)) {
        n.corrupt = fraction(corrupt.probability);
        n.corrupt_correlation = fraction(corrupt.correlation);
    }
    tc_netem_rate rate{};
    if (read(a, TCA_NETEM_RATE, rate)) {
        n.rate_bps = static_cast<std::uint64_t>(rate.rate) * 8;
        n.packet_overhead = rate.packet_overhead;
        n.cell_size = rate.cell_size;
        n.cell_overhead = rate.cell_overhead;
    }
    std::uint64_t rate64;
    if (read(a, TCA_NETEM_RATE64, rate64)) n.rate_bps = rate64 * 8;
    std::uint32_t ecn;
    if (read(a, TCA_NETEM_ECN, ecn)) n.ecn = ecn != 0;
    if (auto it = a.find(TCA_NETEM_LOSS); it != a.end()) {
        Attrs loss = parse_attrs(it->second.data(), it->second.size());
        tc_netem_gemodel ge;
        tc_netem_gimodel gi;
        if (read(loss, NETEM_LOSS_GE, ge)) {
            n.loss =
                Loss{Loss::Model::gemodel, fraction(ge.p), 0, fraction(ge.r), 1.0 - fraction(ge.h), fraction(ge.k1), 0};
        } else if (read(loss, NETEM_LOSS_GI, gi)) {
            n.loss = Loss{Loss::Model::state, fraction(gi.p13), 0, fraction(gi.p31), fraction(gi.p32),
                          fraction(gi.p23),   fraction(gi.p14)};
        }
    }
    tc_netem_slot slot;
    if (read(a, TCA_NETEM_SLOT, slot) && (slot.min_delay || slot.max_delay || slot.dist_jitter)) {
        Slot s;
        s.min_delay = std::chrono::nanoseconds{slot.min_delay};
        s.max_delay = std::chrono::nanoseconds{slot.max_delay};
        // The kernel reports "unlimited" as INT_MAX.
        s.packets = slot.max_packets == INT32_MAX ? 0 : static_cast<std::uint32_t>(slot.max_packets);
        s.bytes = slot.max_bytes == INT32_MAX ? 0 : static_cast<std::uint32_t>(slot.max_bytes);
        s.dist_delay = std::chrono::nanoseconds{slot.dist_delay};
        s.dist_jitter = std::chrono::nanoseconds{slot.dist_jitter};
        n.slot = s;
    }
    return n;
}

std::vector<Mismatch> compare_netem(const Netem& asked, const Netem& k) {
    std::vector<Mismatch> out;
    duration_field(out, "delay", asked.delay, k.delay);
    duration_field(out, "jitter", asked.jitter, k.jitter);
    probability_field(out, "correlation", asked.delay_correlation, k.delay_correlation);
    exact_field(out, "limit", asked.limit_packets, k.limit_packets);
    if (asked.loss.model != k.loss.model && !(asked.loss.model == Loss::Model::random && asked.loss.probability == 0))
        out.push_back({"loss model", to_string(asked.loss.model), to_string(k.loss.model)});
    probability_field(out, "loss", asked.loss.probability, k.loss.probability);
    if (asked.loss.model == Loss::Model::random)
        probability_field(out, "loss_correlation", asked.loss.correlation, k.loss.correlation);
    if (asked.loss.model == Loss::Model::gemodel || asked.loss.model == Loss::Model::state) {
        probability_field(out, asked.loss.model == Loss::Model::gemodel ? "loss r" : "loss p31", asked.loss.r,
                          k.loss.r);
        probability_field(out, asked.loss.model == Loss::Model::gemodel ? "loss 1-h" : "loss p32",
                          asked.loss.one_minus_h, k.loss.one_minus_h);
        probability_field(out, asked.loss.model == Loss::Model::gemodel ? "loss 1-k" : "loss p23",
                          asked.loss.one_minus_k, k.loss.one_minus_k);
        if (asked.loss.model == Loss::Model::state) probability_field(out, "loss p14", asked.loss.p14, k.loss.p14);
    }
    probability_field(out, "duplicate", asked.duplicate, k.duplicate);
    probability_field(out, "duplicate_correlation", asked.duplicate_correlation, k.duplicate_correlation);
    probability_field(out, "reorder", asked.reorder, k.reorder);
    probability_field(out, "reorder_correlation", asked.reorder_correlation, k.reorder_correlation);
    exact_field(out, "gap", asked.gap, k.gap);
    probability_field(out, "corrupt", asked.corrupt, k.corrupt);
    probability_field(out, "corrupt_correlation", asked.corrupt_correlation, k.corrupt_correlation);
    // netem's rate travels as bytes per second: compare at that resolution.
    if (asked.rate_bps / 8 != k.rate_bps / 8)
        out.push_back({"rate", units::format_rate(asked.rate_bps), units::format_rate(k.rate_bps)});
    exact_field(out, "packet_overhead", asked.packet_overhead, k.packet_overhead);
    exact_field(out, "cell_size", asked.cell_size, k.cell_size);
    exact_field(out, "cell_overhead", asked.cell_overhead, k.cell_overhead);
    exact_field(out, "ecn", asked.ecn, k.ecn);
    if (asked.slot.has_value() != k.slot.has_value()) {
        out.push_back({"slot", asked.slot ? "set" : "none", k.slot ? "set" : "none"});
    } else if (asked.slot) {
        duration_field(out, "slot.min_delay", asked.slot->min_delay, k.slot->min_delay);
        duration_field(out, "slot.max_delay", asked.slot->max_delay, k.slot->max_delay);
        exact_field(out, "slot.packets", asked.slot->packets, k.slot->packets);
        exact_field(out, "slot.bytes", asked.slot->bytes, k.slot->bytes);
    }
    return out;
}

std::uint64_t decode_tbf_rate(const std::vector<std::uint8_t>& options) {
    Attrs a = parse_attrs(options.data(), options.size());
    std::uint64_t rate64;
    if (read(a, TCA_TBF_RATE64, rate64)) return rate64 * 8;
    tc_tbf_qopt q;
    if (read(a, TCA_TBF_PARMS, q)) return static_cast<std::uint64_t>(q.rate.rate) * 8;
    return 0;
}

std::uint64_t decode_htb_class_rate(const std::vector<std::uint8_t>& options) {
    Attrs a = parse_attrs(options.data(), options.size());
    std::uint64_t rate64;
    if (read(a, TCA_HTB_RATE64, rate64)) return rate64 * 8;
    tc_htb_opt o;
    if (read(a, TCA_HTB_PARMS, o)) return static_cast<std::uint64_t>(o.rate.rate) * 8;
    return 0;
}

std::uint32_t decode_fifo_limit(const std::vector<std::uint8_t>& options) {
    tc_fifo_qopt q{};
    if (options.size() >= sizeof q) std::memcpy(&q, options.data(), sizeof q);
    return q.limit;
}

std::uint32_t decode_queue_size(const std::string& kind, const std::vector<std::uint8_t>& options) {
    if (kind == "pfifo" || kind == "bfifo") return decode_fifo_limit(options);
    Attrs a = parse_attrs(options.data(), options.size());
    std::uint32_t v = 0;
    if (kind == "fq_codel") read(a, TCA_FQ_CODEL_LIMIT, v);
    if (kind == "cake") read(a, TCA_CAKE_MEMORY, v);
    return v;
}

std::vector<Mismatch> verify_tree(QdiscKernel& kernel, int ifindex, const Direction& d, const Psched& psched,
                                  const TreeLayout& layout) {
    std::vector<Mismatch> out;
    auto qdiscs = kernel.dump(ifindex, false);
    auto find = [&](std::uint32_t handle) -> const TcObject* {
        for (const auto& q : qdiscs)
            if (q.handle == handle) return &q;
        return nullptr;
    };
    const TcObject* root = find(layout.netem);
    if (!root || root->kind != "netem" || root->parent != layout.netem_parent) {
        out.push_back({"netem qdisc", fmt::format("netem {:x}:", layout.netem >> 16), root ? root->kind : "none"});
        return out;
    }
    auto mm = compare_netem(d.netem, decode_netem(root->options, psched));
    out.insert(out.end(), mm.begin(), mm.end());
    if (d.rate_bps == 0 || d.shaper == Shaper::netem) return out;
    const TcObject* shaper = find(layout.shaper);
    if (!shaper || shaper->kind != to_string(d.shaper)) {
        out.push_back({"shaper", to_string(d.shaper), shaper ? shaper->kind : "none"});
        return out;
    }
    std::uint64_t rate = 0;
    if (d.shaper == Shaper::tbf) {
        rate = decode_tbf_rate(shaper->options);
    } else {
        for (const auto& c : kernel.dump(ifindex, true))
            if (c.handle == (layout.shaper | 1)) rate = decode_htb_class_rate(c.options);
    }
    if (rate / 8 != d.rate_bps / 8) out.push_back({"rate", units::format_rate(d.rate_bps), units::format_rate(rate)});
    if (d.queue != Queue::none) {
        const TcObject* q = find(layout.queue);
        if (!q || q->kind != to_string(d.queue))
            out.push_back({"qdisc", to_string(d.queue), q ? q->kind : "none"});
        else if (auto want = queue_size(d), got = decode_queue_size(q->kind, q->options); want && got != want)
            out.push_back({"qdisc_limit", std::to_string(want), std::to_string(got)});
    }
    return out;
}

std::string describe(const std::vector<Mismatch>& m) {
    std::string out;
    for (const auto& x : m)
        out += fmt::format("{}{}: asked {}, the kernel has {}", out.empty() ? "" : "; ", x.field, x.asked, x.kernel);
    return out;
}

}  // namespace wanlab::netem
