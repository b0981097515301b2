#include "netem/readback.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include <fmt/format.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>

#include "core/units.h"
#include "netem/queue.h"

namespace wanlab::netem {
namespace {

using Attrs = NlAttrs;
Attrs parse_attrs(const std::uint8_t* p, std::size_t size) { return parse_attributes(p, size); }

template <class T>
bool read(const Attrs& a, int type, T& out) {
    auto it = a.find(type);
    if (it == a.end() || it->second.size() < sizeof(T)) return false;
    std::memcpy(&out, it->second.data(), sizeof(T));
    return true;
}

}  // namespace

NlAttrs parse_attributes(const std::uint8_t* p, std::size_t size) {
    NlAttrs out;
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

Netem decode_netem(const std::vector<std::uint8_t>& options, const Psched& psched) {
    if (options.size() < sizeof(tc_netem_qopt)) return Netem{};
    NetemWire w;
    std::memcpy(&w.qopt, options.data(), sizeof w.qopt);
    std::size_t start = NLA_ALIGN(sizeof(tc_netem_qopt));
    Attrs a = start < options.size() ? parse_attrs(options.data() + start, options.size() - start) : Attrs{};
    std::int64_t ns;
    if (read(a, TCA_NETEM_LATENCY64, ns)) w.latency64 = ns;
    if (read(a, TCA_NETEM_JITTER64, ns)) w.jitter64 = ns;
    read(a, TCA_NETEM_CORR, w.corr);
    read(a, TCA_NETEM_REORDER, w.reorder);
    read(a, TCA_NETEM_CORRUPT, w.corrupt);
    read(a, TCA_NETEM_RATE, w.rate);
    std::uint64_t rate64;
    if (read(a, TCA_NETEM_RATE64, rate64)) w.rate64 = rate64;
    read(a, TCA_NETEM_ECN, w.ecn);
    std::uint64_t seed;
    if (read(a, kNetemPrngSeed, seed)) w.prng_seed = seed;
    if (auto it = a.find(TCA_NETEM_LOSS); it != a.end()) {
        Attrs loss = parse_attrs(it->second.data(), it->second.size());
        tc_netem_gemodel ge;
        tc_netem_gimodel gi;
        if (read(loss, NETEM_LOSS_GE, ge))
            w.gemodel = ge;
        else if (read(loss, NETEM_LOSS_GI, gi))
            w.gimodel = gi;
    }
    tc_netem_slot slot;
    if (read(a, TCA_NETEM_SLOT, slot)) w.slot = slot;
    return from_wire(w, psched);
}

std::vector<Mismatch> compare_netem(const Netem& asked, const Netem& kernel) {
    std::vector<Mismatch> out;
    for (const auto& a : attributes())
        if (a.compare) a.compare(a, asked, kernel, out);
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
        if (!q || q->kind != to_string(d.queue)) {
            out.push_back({"qdisc", to_string(d.queue), q ? q->kind : "none"});
        } else {
            auto mm = compare_queue(d, decode_queue(q->kind, q->options));
            out.insert(out.end(), mm.begin(), mm.end());
        }
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
