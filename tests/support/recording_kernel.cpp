#include "tests/support/recording_kernel.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>

#include "core/error.h"

namespace wanlab::netem {

int RecordingKernel::create_ifb(const std::string& name) {
    if (devices.count(name)) throw Error(fmt::format("creating ifb device {}: Object exists", name));
    link_log.push_back("add ifb " + name);
    int index = 100 + static_cast<int>(devices.size());
    devices[name] = index;
    return index;
}

void RecordingKernel::delete_link(const std::string& name) {
    link_log.push_back("delete " + name);
    if (auto it = devices.find(name); it != devices.end()) {
        qdiscs.erase(it->second);
        classes.erase(it->second);
        devices.erase(it);
    }
}

int RecordingKernel::ifindex(const std::string& dev) {
    auto it = devices.find(dev);
    if (it == devices.end()) throw Error(fmt::format("no network device `{}` here", dev));
    return it->second;
}

void RecordingKernel::send(const Request& r) {
    sent.push_back(r);
    if (fail_next) {
        std::string why = *fail_next;
        fail_next.reset();
        throw Error(fmt::format("{}: {}", r.what, why));
    }
    nlmsghdr h;
    std::memcpy(&h, r.bytes.data(), sizeof h);
    TcObject o = parse_tc_message(r.bytes);
    if (h.nlmsg_type == RTM_NEWTFILTER) {
        filters[o.ifindex].push_back(o);
        return;
    }
    if (h.nlmsg_type == RTM_DELTFILTER) {  // by parent and priority, as the kernel deletes a whole priority
        std::erase_if(filters[o.ifindex],
                      [&](const TcObject& f) { return f.parent == o.parent && (f.info >> 16) == (o.info >> 16); });
        return;
    }
    auto& list =
        h.nlmsg_type == RTM_NEWTCLASS || h.nlmsg_type == RTM_DELTCLASS ? classes[o.ifindex] : qdiscs[o.ifindex];
    // Filters go with the qdisc they hang on: the ingress hook's (ffff:) or the root tree's.
    auto on_ingress = [](const TcObject& f) { return TC_H_MAJ(f.parent) == TC_H_MAJ(TC_H_INGRESS); };
    if (h.nlmsg_type == RTM_DELQDISC && o.parent == TC_H_INGRESS) {
        std::erase_if(list, [](const TcObject& q) { return q.parent == TC_H_INGRESS; });
        std::erase_if(filters[o.ifindex], on_ingress);
        return;
    }
    if (h.nlmsg_type == RTM_DELQDISC && o.parent == TC_H_ROOT) {
        std::erase_if(list, [](const TcObject& q) { return q.parent != TC_H_INGRESS; });
        classes[o.ifindex].clear();
        std::erase_if(filters[o.ifindex], [&](const TcObject& f) { return !on_ingress(f); });
        return;
    }
    auto same = [&](const TcObject& x) {
        return h.nlmsg_type == RTM_NEWTCLASS ? x.handle == o.handle : x.parent == o.parent;
    };
    auto it = std::find_if(list.begin(), list.end(), same);
    if (h.nlmsg_type == RTM_NEWQDISC || h.nlmsg_type == RTM_NEWTCLASS) {
        if (it != list.end() && (h.nlmsg_flags & NLM_F_EXCL)) throw Error(fmt::format("{}: File exists", r.what));
        // A new root replaces the whole tree below the old one.
        if (h.nlmsg_type == RTM_NEWQDISC && o.parent == TC_H_ROOT && it != list.end() && it->kind != o.kind) {
            list.clear();
            classes[o.ifindex].clear();
            it = list.end();
        }
        o.message[4] = static_cast<std::uint8_t>(h.nlmsg_type);  // what a dump would echo
        if (h.nlmsg_type == RTM_NEWQDISC && it != list.end() && it->handle == o.handle && it->kind != o.kind)
            // The kernel changes a qdisc in place only with options of its own kind.
            throw Error(fmt::format("{}: Invalid qdisc name", r.what));
        if (h.nlmsg_type == RTM_NEWQDISC && it != list.end() && it->handle != o.handle) {
            // Grafting another qdisc at a parent destroys the old one with everything below it.
            std::vector<std::uint32_t> gone{it->handle & 0xffff0000u};
            for (std::size_t i = 0; i < gone.size(); ++i) {
                auto major = gone[i];
                std::erase_if(classes[o.ifindex], [&](const TcObject& c) { return (c.handle & 0xffff0000u) == major; });
                for (const auto& q : list)
                    if ((q.parent & 0xffff0000u) == major && q.parent != TC_H_ROOT)
                        gone.push_back(q.handle & 0xffff0000u);
            }
            std::erase_if(list, [&](const TcObject& q) {
                return &q != &*it && std::find(gone.begin(), gone.end(), q.handle & 0xffff0000u) != gone.end();
            });
            it = std::find_if(list.begin(), list.end(), same);
        }
        if (it != list.end())
            *it = o;
        else
            list.push_back(o);
    } else if (it != list.end()) {
        list.erase(it);
    }
}

std::vector<TcObject> RecordingKernel::dump_filters(int ifindex, std::uint32_t parent) {
    std::vector<TcObject> out;
    for (const auto& f : filters[ifindex])
        if (f.parent == parent) out.push_back(f);
    return out;
}

std::vector<TcObject> RecordingKernel::dump(int ifindex, bool want_classes) {
    if (want_classes) return classes[ifindex];
    auto list = qdiscs[ifindex];
    if (list.empty() ||
        std::none_of(list.begin(), list.end(), [](const TcObject& o) { return o.parent == TC_H_ROOT; })) {
        TcObject def;
        def.kind = "noqueue";
        def.ifindex = ifindex;
        def.parent = TC_H_ROOT;
        list.insert(list.begin(), def);
    }
    return list;
}

}  // namespace wanlab::netem
