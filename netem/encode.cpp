#include "netem/encode.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>

#include <fmt/format.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>
#include <netlink/route/class.h>
#include <netlink/route/qdisc.h>
#include <netlink/route/qdisc/fifo.h>
#include <netlink/route/qdisc/htb.h>
#include <netlink/route/qdisc/tbf.h>
#include <netlink/route/tc.h>

#include "core/error.h"
#include "netem/attributes.h"
#include "netem/queue.h"

namespace wanlab::netem {
namespace {

struct MsgFree {
    void operator()(nl_msg* m) const { nlmsg_free(m); }
};
using Msg = std::unique_ptr<nl_msg, MsgFree>;

struct QdiscPut {
    void operator()(rtnl_qdisc* q) const { rtnl_qdisc_put(q); }
};
struct ClassPut {
    void operator()(rtnl_class* c) const { rtnl_class_put(c); }
};

Request to_request(std::string what, nl_msg* m) {
    const nlmsghdr* h = nlmsg_hdr(m);
    const auto* p = reinterpret_cast<const std::uint8_t*>(h);
    return Request{std::move(what), std::vector<std::uint8_t>(p, p + h->nlmsg_len)};
}

void check(int err, const std::string& what) {
    if (err < 0) throw Error(fmt::format("encoding {}: {}", what, nl_geterror(err)));
}

// Appends an attribute whose payload starts with a fixed struct, as netem's TCA_OPTIONS is:
// iproute2 writes it with a plain type (no NLA_F_NESTED) and so do we.
nlattr* open_raw(nl_msg* m, int type) {
    auto* start = reinterpret_cast<nlattr*>(nlmsg_tail(nlmsg_hdr(m)));
    if (nla_put(m, type, 0, nullptr) < 0) throw Error("encoding netem options: message too large");
    return start;
}

void close_raw(nl_msg* m, nlattr* start) {
    start->nla_len =
        static_cast<std::uint16_t>(reinterpret_cast<char*>(nlmsg_tail(nlmsg_hdr(m))) - reinterpret_cast<char*>(start));
}

template <class T>
void put(nl_msg* m, int type, const T& value) {
    if (nla_put(m, type, sizeof value, &value) < 0) throw Error("encoding netem options: message too large");
}

// The netem attributes after qopt, in iproute2's order, from the structs the attribute rows
// filled (netem/attributes.h).
void netem_attributes(nl_msg* m, const NetemWire& w, const std::vector<std::int16_t>& table) {
    put(m, TCA_NETEM_CORR, w.corr);
    if (!table.empty() &&
        nla_put(m, TCA_NETEM_DELAY_DIST, static_cast<int>(table.size() * sizeof(std::int16_t)), table.data()) < 0)
        throw Error("encoding netem options: distribution table too large");
    put(m, TCA_NETEM_REORDER, w.reorder);
    put(m, TCA_NETEM_CORRUPT, w.corrupt);
    if (w.gemodel || w.gimodel) {
        nlattr* loss = nla_nest_start(m, TCA_NETEM_LOSS);
        if (w.gemodel) put(m, NETEM_LOSS_GE, *w.gemodel);
        if (w.gimodel) put(m, NETEM_LOSS_GI, *w.gimodel);
        nla_nest_end(m, loss);
    }
    if (w.rate64) put(m, TCA_NETEM_RATE64, *w.rate64);
    put(m, TCA_NETEM_RATE, w.rate);
    put(m, TCA_NETEM_ECN, w.ecn);
    put(m, TCA_NETEM_SLOT, w.slot.value_or(tc_netem_slot{}));
    if (w.latency64) put(m, TCA_NETEM_LATENCY64, *w.latency64);
    if (w.jitter64) put(m, TCA_NETEM_JITTER64, *w.jitter64);
    if (w.prng_seed) put(m, kNetemPrngSeed, *w.prng_seed);
}

Msg new_message(int type, int flags, int ifindex, std::uint32_t parent, std::uint32_t handle) {
    Msg m(nlmsg_alloc_simple(type, flags));
    if (!m) throw Error("encoding a qdisc request: out of memory");
    tcmsg t{};
    t.tcm_family = AF_UNSPEC;
    t.tcm_ifindex = ifindex;
    t.tcm_parent = parent;
    t.tcm_handle = handle;
    if (nlmsg_append(m.get(), &t, sizeof t, NLMSG_ALIGNTO) < 0) throw Error("encoding a qdisc request: out of memory");
    return m;
}

constexpr int kCreateOrReplace = NLM_F_CREATE | NLM_F_REPLACE;

}  // namespace

Request netem_request(const Netem& n, int ifindex, const std::string& dev, std::uint32_t parent, std::uint32_t handle,
                      const Psched& psched) {
    std::vector<std::int16_t> table;
    if (!n.distribution.empty()) table = load_distribution(n.distribution);
    // A 16384-entry table is 32 KiB: size the message for it.
    std::size_t size = 4096 + table.size() * sizeof(std::int16_t);
    Msg m(nlmsg_alloc_size(size));
    if (!m) throw Error("encoding netem: out of memory");
    nlmsghdr* h = nlmsg_put(m.get(), 0, 0, RTM_NEWQDISC, 0, kCreateOrReplace);
    (void)h;
    tcmsg t{};
    t.tcm_family = AF_UNSPEC;
    t.tcm_ifindex = ifindex;
    t.tcm_parent = parent;
    t.tcm_handle = handle;
    nlmsg_append(m.get(), &t, sizeof t, NLMSG_ALIGNTO);
    nla_put_string(m.get(), TCA_KIND, "netem");
    auto payload = netem_options(n, psched, table);
    if (nla_put(m.get(), TCA_OPTIONS, static_cast<int>(payload.size()), payload.data()) < 0)
        throw Error("encoding netem: message too large");
    return to_request(fmt::format("replace netem {:x}: on {}", handle >> 16, dev), m.get());
}

namespace {

// tbf through libnl-route's tbf module (rate table, burst and limit computed as tc does).
Request tbf_request(const Direction& d, int ifindex, const std::string& dev, std::uint32_t parent, std::uint32_t mtu,
                    const TreeLayout& layout) {
    std::unique_ptr<rtnl_qdisc, QdiscPut> q(rtnl_qdisc_alloc());
    rtnl_tc_set_ifindex(TC_CAST(q.get()), ifindex);
    rtnl_tc_set_parent(TC_CAST(q.get()), parent);
    rtnl_tc_set_handle(TC_CAST(q.get()), layout.shaper);
    check(rtnl_tc_set_kind(TC_CAST(q.get()), "tbf"), "tbf");
    std::uint64_t burst = tbf_burst(d.rate_bps, mtu);
    if (d.rate_bps / 8 > static_cast<std::uint64_t>(std::numeric_limits<int>::max()))
        throw InputError(
            fmt::format("shaper = \"tbf\" goes up to 17gbit through libnl; use shaper = \"htb\" for {}", d.rate_bps));
    rtnl_qdisc_tbf_set_rate(q.get(), static_cast<int>(d.rate_bps / 8), static_cast<int>(burst), 0);
    check(rtnl_qdisc_tbf_set_limit_by_latency(q.get(), 50'000), "tbf limit");
    nl_msg* raw = nullptr;
    check(rtnl_qdisc_build_add_request(q.get(), kCreateOrReplace, &raw), "tbf");
    Msg m(raw);
    return to_request(fmt::format("replace tbf {:x}: on {}", layout.shaper >> 16, dev), m.get());
}

std::vector<Request> htb_requests(const Direction& d, int ifindex, const std::string& dev, std::uint32_t parent,
                                  std::uint32_t mtu, const TreeLayout& layout) {
    std::vector<Request> out;
    std::unique_ptr<rtnl_qdisc, QdiscPut> q(rtnl_qdisc_alloc());
    rtnl_tc_set_ifindex(TC_CAST(q.get()), ifindex);
    rtnl_tc_set_parent(TC_CAST(q.get()), parent);
    rtnl_tc_set_handle(TC_CAST(q.get()), layout.shaper);
    check(rtnl_tc_set_kind(TC_CAST(q.get()), "htb"), "htb");
    check(rtnl_htb_set_defcls(q.get(), 1), "htb default class");
    nl_msg* raw = nullptr;
    check(rtnl_qdisc_build_add_request(q.get(), kCreateOrReplace, &raw), "htb");
    Msg m(raw);
    out.push_back(to_request(fmt::format("replace htb {:x}: on {}", layout.shaper >> 16, dev), m.get()));

    std::unique_ptr<rtnl_class, ClassPut> c(rtnl_class_alloc());
    rtnl_tc_set_ifindex(TC_CAST(c.get()), ifindex);
    rtnl_tc_set_parent(TC_CAST(c.get()), layout.shaper);
    rtnl_tc_set_handle(TC_CAST(c.get()), layout.shaper | 1);
    check(rtnl_tc_set_kind(TC_CAST(c.get()), "htb"), "htb class");
    check(rtnl_htb_set_rate64(c.get(), d.rate_bps / 8), "htb rate");
    check(rtnl_htb_set_ceil64(c.get(), d.rate_bps / 8), "htb ceil");
    // The bucket tbf gets (netem/link_spec.h): libnl's default, rate/HZ + 1600 bytes with the
    // kernel's nanosecond psched clock, is about one frame, which a late timer turns into a
    // lower rate. (htb keeps its tokens when the rate changes in place; tbf refills its bucket.)
    const auto burst = static_cast<std::uint32_t>(std::min<std::uint64_t>(tbf_burst(d.rate_bps, mtu), UINT32_MAX));
    check(rtnl_htb_set_rbuffer(c.get(), burst), "htb burst");
    check(rtnl_htb_set_cbuffer(c.get(), burst), "htb cburst");
    nl_msg* craw = nullptr;
    check(rtnl_class_build_add_request(c.get(), kCreateOrReplace, &craw), "htb class");
    Msg cm(craw);
    out.push_back(to_request(fmt::format("replace htb class {:x}:1 on {}", layout.shaper >> 16, dev), cm.get()));
    return out;
}

Request queue_request(const Direction& d, int ifindex, const std::string& dev, const TreeLayout& layout,
                      const Psched& psched) {
    const std::string what = fmt::format("replace {} {:x}: on {}", to_string(d.queue), layout.queue >> 16, dev);
    if (d.queue == Queue::pfifo || d.queue == Queue::bfifo) {
        // fifo needs a limit; tc's default is the device's txqueuelen (packets) or
        // txqueuelen x MTU (bytes). wanlab states it: 1000 packets, or 1000 x 1514 bytes.
        std::unique_ptr<rtnl_qdisc, QdiscPut> q(rtnl_qdisc_alloc());
        rtnl_tc_set_ifindex(TC_CAST(q.get()), ifindex);
        rtnl_tc_set_parent(TC_CAST(q.get()), layout.shaper | 1);
        rtnl_tc_set_handle(TC_CAST(q.get()), layout.queue);
        check(rtnl_tc_set_kind(TC_CAST(q.get()), to_string(d.queue)), to_string(d.queue));
        int limit = static_cast<int>(std::min<std::uint64_t>(d.queue_limit, std::numeric_limits<int>::max()));
        check(rtnl_qdisc_fifo_set_limit(q.get(), limit ? limit : (d.queue == Queue::bfifo ? 1000 * 1514 : 1000)),
              "fifo limit");
        nl_msg* raw = nullptr;
        check(rtnl_qdisc_build_add_request(q.get(), kCreateOrReplace, &raw), to_string(d.queue));
        Msg m(raw);
        return to_request(what, m.get());
    }
    // The other kinds have no libnl module (or one that cannot say everything): their
    // options come from netem/queue.h, nested attributes except sfq's struct. cake's own
    // shaper stays off (no TCA_CAKE_BASE_RATE64): the rate is the shaper's above it.
    Msg m = new_message(RTM_NEWQDISC, kCreateOrReplace, ifindex, layout.shaper | 1, layout.queue);
    if (nla_put_string(m.get(), TCA_KIND, to_string(d.queue)) < 0) throw Error("encoding a queue: message too large");
    auto options = queue_options(d, psched);
    if (!options.empty() || d.queue == Queue::sfq) {
        int type = d.queue == Queue::sfq ? TCA_OPTIONS : (TCA_OPTIONS | NLA_F_NESTED);
        if (nla_put(m.get(), type, static_cast<int>(options.size()), options.data()) < 0)
            throw Error(fmt::format("encoding {} options: message too large", to_string(d.queue)));
    }
    return to_request(what, m.get());
}

}  // namespace

Psched Psched::from_proc() {
    Psched p;
    std::ifstream in("/proc/net/psched");
    unsigned t2us = 0, us2t = 0, clock_res = 0, hz = 0;
    if (in >> std::hex >> t2us >> us2t >> clock_res >> hz && us2t) {
        // As iproute2's tc_core_init(): ticks per usec = t2us / us2t, scaled when the clock
        // resolution is coarser than 1 GHz.
        double tick_in_usec = static_cast<double>(t2us) / us2t;
        if (clock_res == 1000000000) p.ticks_per_usec = tick_in_usec;  // 1000/64 = 15.625
    }
    return p;
}

std::uint32_t Psched::ticks(std::chrono::nanoseconds d) const {
    double t = static_cast<double>(d.count()) / 1000.0 * ticks_per_usec;
    return static_cast<std::uint32_t>(std::min<double>(t, UINT32_MAX));
}

std::uint32_t probability(double fraction) {
    if (fraction <= 0) return 0;
    if (fraction >= 1) return UINT32_MAX;
    return static_cast<std::uint32_t>(std::rint(fraction * UINT32_MAX));
}

std::vector<std::int16_t> load_distribution(const std::string& name_or_path) {
    std::vector<std::string> tried;
    if (name_or_path.find('/') != std::string::npos) {
        tried.push_back(name_or_path);
    } else {
        for (const char* dir : {"/usr/lib/x86_64-linux-gnu/tc", "/usr/lib/aarch64-linux-gnu/tc", "/usr/lib/tc",
                                "/usr/lib64/tc", "/usr/local/lib/tc"})
            tried.push_back(fmt::format("{}/{}.dist", dir, name_or_path));
    }
    for (const auto& path : tried) {
        std::ifstream in(path);
        if (!in) continue;
        std::vector<std::int16_t> table;
        std::string line;
        while (std::getline(in, line)) {
            if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
            std::istringstream words(line);
            long v;
            while (words >> v) {
                if (v < INT16_MIN || v > INT16_MAX)
                    throw InputError(fmt::format("distribution table {}: value {} does not fit 16 bits", path, v));
                table.push_back(static_cast<std::int16_t>(v));
            }
        }
        if (table.empty() || table.size() > NETEM_DIST_MAX)
            throw InputError(fmt::format("distribution table {} has {} values; netem takes 1 to {}", path, table.size(),
                                         NETEM_DIST_MAX));
        return table;
    }
    std::string places;
    for (const auto& t : tried) places += "\n  " + t;
    throw InputError(
        fmt::format("no delay distribution table \"{}\"; looked for:{}\n"
                    "iproute2 ships normal, pareto, paretonormal and experimental "
                    "(Debian: apt-get install iproute2)",
                    name_or_path, places));
}

std::vector<std::uint8_t> netem_options(const Netem& n, const Psched& psched, const std::vector<std::int16_t>& table) {
    Msg m(nlmsg_alloc_size(4096 + table.size() * sizeof(std::int16_t)));
    if (!m) throw Error("encoding netem: out of memory");
    nlmsg_put(m.get(), 0, 0, RTM_NEWQDISC, 0, 0);
    nlattr* options = open_raw(m.get(), TCA_OPTIONS);
    NetemWire w = to_wire(n, psched);
    if (nlmsg_append(m.get(), &w.qopt, sizeof w.qopt, NLMSG_ALIGNTO) < 0) throw Error("encoding netem: out of memory");
    netem_attributes(m.get(), w, table);
    close_raw(m.get(), options);
    const auto* begin = reinterpret_cast<const std::uint8_t*>(nla_data(options));
    return std::vector<std::uint8_t>(begin, begin + nla_len(options));
}

std::vector<Request> tree_requests(const Direction& d, int ifindex, const std::string& dev, std::uint32_t mtu,
                                   const Psched& psched, const TreeLayout& layout) {
    std::vector<Request> out;
    out.push_back(netem_request(d.netem, ifindex, dev, layout.netem_parent, layout.netem, psched));
    for (auto& r : shaper_requests(d, ifindex, dev, layout.netem | 1, mtu, psched, layout)) out.push_back(std::move(r));
    return out;
}

std::vector<Request> shaper_requests(const Direction& d, int ifindex, const std::string& dev, std::uint32_t parent,
                                     std::uint32_t mtu, const Psched& psched, const TreeLayout& layout) {
    std::vector<Request> out;
    if (d.rate_bps == 0 || d.shaper == Shaper::netem) return out;
    if (d.shaper == Shaper::tbf)
        out.push_back(tbf_request(d, ifindex, dev, parent, mtu, layout));
    else
        for (auto& r : htb_requests(d, ifindex, dev, parent, mtu, layout)) out.push_back(std::move(r));
    if (d.queue != Queue::none) out.push_back(queue_request(d, ifindex, dev, layout, psched));
    return out;
}

Request delete_qdisc(int ifindex, std::uint32_t parent, std::uint32_t handle, std::string what) {
    Msg m = new_message(RTM_DELQDISC, 0, ifindex, parent, handle);
    return to_request(std::move(what), m.get());
}

Request delete_root(int ifindex, const std::string& dev) {
    return delete_qdisc(ifindex, TC_H_ROOT, 0, fmt::format("delete root qdisc of {}", dev));
}

}  // namespace wanlab::netem
