#include "netem/device.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <sstream>

#include <fmt/format.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include "core/error.h"
#include "netem/readback.h"

namespace wanlab::netem {
namespace {

std::string hex(const std::vector<std::uint8_t>& bytes) {
    static const char* digits = "0123456789abcdef";
    std::string out;
    for (auto b : bytes) {
        out += digits[b >> 4];
        out += digits[b & 15];
    }
    return out;
}

std::vector<std::uint8_t> unhex(const std::string& s) {
    std::vector<std::uint8_t> out;
    for (std::size_t i = 0; i + 1 < s.size(); i += 2)
        out.push_back(static_cast<std::uint8_t>(std::stoi(s.substr(i, 2), nullptr, 16)));
    return out;
}

void put_attr(std::vector<std::uint8_t>& msg, std::uint16_t type, const void* data, std::size_t size) {
    nlattr a{static_cast<std::uint16_t>(NLA_HDRLEN + size), type};
    std::size_t at = msg.size();
    msg.resize(at + NLA_ALIGN(NLA_HDRLEN + size), 0);
    std::memcpy(&msg[at], &a, sizeof a);
    if (size) std::memcpy(&msg[at + NLA_HDRLEN], data, size);
}

}  // namespace

Request replay_request(const TcObject& o, bool is_class, const std::string& dev) {
    std::vector<std::uint8_t> msg(NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(tcmsg)), 0);
    tcmsg t{};
    t.tcm_family = AF_UNSPEC;
    t.tcm_ifindex = o.ifindex;
    t.tcm_handle = o.handle;
    t.tcm_parent = o.parent;
    std::memcpy(&msg[NLMSG_HDRLEN], &t, sizeof t);
    put_attr(msg, TCA_KIND, o.kind.c_str(), o.kind.size() + 1);
    if (!o.options.empty()) put_attr(msg, TCA_OPTIONS, o.options.data(), o.options.size());
    nlmsghdr h{};
    h.nlmsg_len = static_cast<std::uint32_t>(msg.size());
    h.nlmsg_type = is_class ? RTM_NEWTCLASS : RTM_NEWQDISC;
    h.nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_REPLACE;
    std::memcpy(msg.data(), &h, sizeof h);
    return Request{fmt::format("restore {} {:x}:{:x} ({}) on {}", is_class ? "class" : "qdisc", o.handle >> 16,
                               o.handle & 0xffff, o.kind, dev),
                   std::move(msg)};
}

DeviceQdiscs::DeviceQdiscs(QdiscKernel& kernel, std::string dev)
    : kernel_(&kernel), dev_(std::move(dev)), ifindex_(kernel.ifindex(dev_)) {
    qdiscs_ = kernel.dump(ifindex_, false);
    classes_ = kernel.dump(ifindex_, true);
    // Only the root tree is wanlab's business; ingress/clsact stay as they are.
    std::erase_if(qdiscs_, [](const TcObject& q) { return q.parent == TC_H_INGRESS || q.handle == 0xffff0000u; });
}

DeviceQdiscs::DeviceQdiscs(QdiscKernel& kernel, std::string dev, std::vector<TcObject> qdiscs,
                           std::vector<TcObject> classes)
    : kernel_(&kernel), dev_(std::move(dev)), ifindex_(kernel.ifindex(dev_)), qdiscs_(std::move(qdiscs)),
      classes_(std::move(classes)), changed_(true) {}

DeviceQdiscs::DeviceQdiscs(DeviceQdiscs&& o) noexcept
    : kernel_(o.kernel_), dev_(std::move(o.dev_)), ifindex_(o.ifindex_), qdiscs_(std::move(o.qdiscs_)),
      classes_(std::move(o.classes_)), active_(o.active_), changed_(o.changed_) {
    o.active_ = false;
}

DeviceQdiscs::~DeviceQdiscs() {
    try {
        restore();
    } catch (const std::exception& e) {
        std::fputs(fmt::format("wanlab: could not restore the qdiscs of {}: {}\n", dev_, e.what()).c_str(), stderr);
    }
}

bool DeviceQdiscs::default_root() const {
    for (const auto& q : qdiscs_)
        if (q.parent == TC_H_ROOT) return q.handle == 0;
    return true;
}

namespace {
const char* shaper_kind(const Direction& d) {
    if (d.rate_bps == 0 || d.shaper == Shaper::netem) return nullptr;
    return to_string(d.shaper);
}
}  // namespace

void DeviceQdiscs::apply(const Direction& d, std::uint32_t mtu, const Psched& psched, const TreeLayout& layout) {
    auto current = kernel_->dump(ifindex_, false);
    const TcObject* old_shaper = child_of(current, layout.netem | 1);
    const char* kind = shaper_kind(d);
    // A shaper of another kind cannot be replaced at its own handle ("Invalid qdisc name"):
    // the new one is grafted at the other of two handles, which swaps them atomically (no
    // delete-then-add). The same kind keeps its handle.
    TreeLayout effective = layout;
    constexpr std::uint32_t kAlternate = kAlternateHandle;
    // The bottleneck queue wanlab put below the shaper last time, if any (one of its two
    // handles; a shaper's own default queue has a kernel-chosen one).
    const TcObject* old_queue = old_shaper ? child_of(current, old_shaper->handle | 1) : nullptr;
    if (old_queue && old_queue->handle != layout.queue && old_queue->handle != layout.queue + kAlternate)
        old_queue = nullptr;
    if (old_shaper && kind) {
        bool at_primary = old_shaper->handle == layout.shaper;
        bool same_kind = old_shaper->kind == kind;
        // Back to the shaper's own queue ("none") after one of ours: a fresh shaper comes
        // with its default queue, and deleting ours would leave tbf with a noop queue.
        bool fresh = same_kind && old_queue && d.queue == Queue::none;
        if ((same_kind && !fresh) != at_primary) effective.shaper = layout.shaper + kAlternate;
        if (same_kind && !fresh && old_queue && d.queue != Queue::none) {
            // The queue is always grafted whole at the other of its two handles, which
            // replaces the old one in one step: a change in place would keep every parameter
            // the new trial leaves at its default, and some (fq_codel's and fq_pie's flows)
            // cannot be changed at all.
            effective.queue = old_queue->handle == layout.queue ? layout.queue + kAlternate : layout.queue;
        } else if (effective.shaper != layout.shaper) {
            effective.queue = layout.queue + kAlternate;
        }
    }
    auto requests = tree_requests(d, ifindex_, dev_, mtu, psched, effective);
    // htb takes no change of the qdisc itself ("Change operation not supported by specified
    // qdisc"), and its qdisc options never differ between trials: when it is already there,
    // only its class is replaced.
    std::erase_if(requests, [&](const Request& r) {
        TcObject o = parse_tc_message(r.bytes);
        if (o.kind != "htb" || r.bytes[4] != RTM_NEWQDISC) return false;
        return std::any_of(current.begin(), current.end(), [&](const TcObject& q) {
            return q.kind == "htb" && q.handle == o.handle && q.parent == o.parent;
        });
    });
    // No shaper now but one before: remove it; netem then queues in its own tfifo.
    if (old_shaper && !kind) {
        requests.push_back(delete_qdisc(ifindex_, layout.netem | 1, old_shaper->handle,
                                        fmt::format("remove {} below netem on {}", old_shaper->kind, dev_)));
    }
    apply_requests(requests);
    auto mismatches = verify_tree(*kernel_, ifindex_, d, psched, effective);
    if (!mismatches.empty())
        throw Error(fmt::format("read-back of {} does not match what was applied: {}", dev_, describe(mismatches)));
}

void DeviceQdiscs::apply_requests(const std::vector<Request>& requests) {
    changed_ = true;
    for (const auto& r : requests) kernel_->send(r);
}

namespace {
// Qdiscs whose classes are made by the user; the others (tbf, netem, prio, ...) report
// pseudo-classes that exist with the qdisc and cannot be created.
bool user_classes(const std::string& kind) {
    return kind == "htb" || kind == "hfsc" || kind == "drr" || kind == "qfq" || kind == "cbq" || kind == "ets";
}
}  // namespace

void DeviceQdiscs::restore() {
    if (!active_ || !changed_) return;
    // Deleting the root gives the device the kernel's default qdisc: exactly what it had if
    // the snapshot's root was a default (handle 0); otherwise the snapshot is replayed.
    bool root_is_default = true;
    for (const auto& q : kernel_->dump(ifindex_, false))
        if (q.parent == TC_H_ROOT) root_is_default = q.handle == 0;
    if (!root_is_default) kernel_->send(delete_root(ifindex_, dev_));
    std::vector<std::string> failures;
    auto replay = [&](const TcObject& o, bool is_class) {
        try {
            kernel_->send(replay_request(o, is_class, dev_));
        } catch (const Error& e) {
            failures.emplace_back(e.what());  // go on: restore as much as possible
        }
    };
    if (!default_root()) {
        std::vector<std::uint32_t> classful;
        for (const auto& q : qdiscs_)
            if (user_classes(q.kind)) classful.push_back(q.handle);
        for (const auto& q : qdiscs_)
            if (q.parent == TC_H_ROOT) replay(q, false);
        for (const auto& c : classes_)
            if (std::find(classful.begin(), classful.end(), c.handle & 0xffff0000u) != classful.end()) replay(c, true);
        for (const auto& q : qdiscs_)
            if (q.parent != TC_H_ROOT) replay(q, false);
    }
    changed_ = false;
    if (!failures.empty()) {
        std::string all;
        for (const auto& f : failures) all += (all.empty() ? "" : "; ") + f;
        throw Error(all);
    }
}

std::string DeviceQdiscs::serialize() const {
    std::string out = fmt::format("device {}\n", dev_);
    for (const auto& q : qdiscs_) out += "qdisc " + hex(q.message) + "\n";
    for (const auto& c : classes_) out += "class " + hex(c.message) + "\n";
    return out;
}

DeviceQdiscs DeviceQdiscs::from_serialized(QdiscKernel& kernel, std::string dev, const std::string& text) {
    std::vector<TcObject> qdiscs, classes;
    std::istringstream lines(text);
    std::string kind, data;
    while (lines >> kind >> data) {
        if (kind == "qdisc") qdiscs.push_back(parse_tc_message(unhex(data)));
        if (kind == "class") classes.push_back(parse_tc_message(unhex(data)));
    }
    DeviceQdiscs d(kernel, std::move(dev), std::move(qdiscs), std::move(classes));
    // The saved messages carry the ifindex of the time they were taken; a device that has
    // been recreated since has a new one.
    for (auto* list : {&d.qdiscs_, &d.classes_})
        for (auto& o : *list) o.ifindex = d.ifindex_;
    return d;
}

}  // namespace wanlab::netem
