#include "netem/preflight.h"

#include <sched.h>
#include <sys/utsname.h>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <thread>

#include <fmt/format.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <netlink/netlink.h>
#include <netlink/route/link.h>
#include <netlink/socket.h>

#include "core/error.h"
#include "netem/device.h"
#include "netem/encode.h"
#include "netem/kernel.h"
#include "netem/queue.h"
#include "netem/readback.h"

namespace wanlab::netem {
namespace {

const char* kQdiscKinds[] = {"netem", "tbf",    "htb", "pfifo", "bfifo", "fq_codel", "cake",    "codel",
                             "pie",   "fq_pie", "sfq", "red",   "fq",    "prio",     "ingress", "clsact"};

template <class T>
std::vector<std::uint8_t> bytes_of(const T& v) {
    const auto* p = reinterpret_cast<const std::uint8_t*>(&v);
    return {p, p + sizeof v};
}

// A root (or ingress) qdisc of `kind` on `ifindex` with minimal valid options.
Request minimal_qdisc(const std::string& kind, int ifindex) {
    Direction d;
    if (kind == "netem") {
        d.netem.delay = std::chrono::milliseconds(1);
        return tree_requests(d, ifindex, "lo", 1500, Psched{}).front();
    }
    if (kind == "tbf" || kind == "htb") {
        d.rate_bps = 1'000'000;
        d.shaper = kind == "tbf" ? Shaper::tbf : Shaper::htb;
        // The shaper request of a full tree, moved from below netem to the root.
        Request r = tree_requests(d, ifindex, "lo", 1500, Psched{})[1];
        tcmsg t;
        std::memcpy(&t, r.bytes.data() + NLMSG_HDRLEN, sizeof t);
        t.tcm_parent = TC_H_ROOT;
        std::memcpy(r.bytes.data() + NLMSG_HDRLEN, &t, sizeof t);
        return r;
    }
    TcObject o;
    o.kind = kind;
    o.ifindex = ifindex;
    o.parent = TC_H_ROOT;
    o.handle = 0x10000;
    if (kind == "ingress" || kind == "clsact") {
        o.parent = TC_H_INGRESS;  // the same value as TC_H_CLSACT
        o.handle = 0xffff0000;
    }
    if (kind == "pfifo" || kind == "bfifo") o.options = bytes_of(tc_fifo_qopt{1000});
    if (kind == "red") {
        // red is the one queue that takes no default options.
        d.queue = Queue::red;
        d.rate_bps = 10'000'000;
        o.options = queue_options(d, Psched{});
    }
    if (kind == "prio") o.options = bytes_of(tc_prio_qopt{3, {1, 2, 2, 2, 1, 2, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1}});
    return replay_request(o, false, "lo");
}

// After "what: reason (kernel text)", the part a user needs.
std::string reason_of(const std::string& message) {
    auto at = message.find(" lo: ");
    return at == std::string::npos ? message : message.substr(at + 5);
}

bool module_present(const std::string& name) {
    std::error_code ec;
    if (std::filesystem::exists("/sys/module/" + name, ec)) return true;
    utsname u{};
    if (uname(&u) != 0) return false;
    std::filesystem::path dir = std::filesystem::path("/lib/modules") / u.release;
    if (!std::filesystem::exists(dir, ec)) return false;
    for (std::filesystem::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
        if (it->path().filename().string().starts_with(name + ".ko")) return true;
    return false;
}

void probe_in_scratch_namespace(std::vector<Feature>& out) {
    if (::unshare(CLONE_NEWNET) != 0)
        throw Error(fmt::format("creating a scratch network namespace: {} (wanlab needs CAP_SYS_ADMIN; run as root)",
                                std::strerror(errno)));
    NetlinkKernel k;
    int lo = k.ifindex("lo");
    for (const char* kind : kQdiscKinds) {
        Feature f{kind, false, {}};
        try {
            k.send(minimal_qdisc(kind, lo));
            f.available = true;
            bool ingress = std::string(kind) == "ingress" || std::string(kind) == "clsact";
            k.send(delete_qdisc(lo, ingress ? TC_H_INGRESS : TC_H_ROOT, 0, fmt::format("delete {} of lo", kind)));
        } catch (const Error& e) {
            f.detail = reason_of(e.what());
        }
        out.push_back(f);
    }
    // netem's seed: a kernel before 6.6 takes the attribute without a word and drops it, so
    // only a dump says whether it was kept.
    Feature seed{"netem_seed", false, {}};
    if (std::any_of(out.begin(), out.end(), [](const Feature& f) { return f.name == "netem" && f.available; })) {
        try {
            Direction d;
            d.netem.delay = std::chrono::milliseconds(1);
            d.netem.seed = 12345;
            k.send(tree_requests(d, lo, "lo", 1500, Psched{}).front());
            for (const auto& q : k.dump(lo, false))
                if (q.kind == "netem" && decode_netem(q.options, Psched{}).seed == 12345u) seed.available = true;
            k.send(delete_qdisc(lo, TC_H_ROOT, 0, "delete netem of lo"));
            if (!seed.available) seed.detail = "netem keeps no seed on this kernel (Linux 6.6 and later do)";
        } catch (const Error& e) {
            seed.detail = reason_of(e.what());
        }
    } else {
        seed.detail = "no netem";
    }
    out.push_back(seed);
    // veth and ifb: create and delete in the scratch namespace. ifb is only tried when its
    // module is already loaded (or built in): loading it creates ifb0/ifb1 on the host.
    nl_sock* s = nl_socket_alloc();
    if (!s || nl_connect(s, NETLINK_ROUTE) < 0) throw Error("opening a netlink socket in the scratch namespace");
    for (const char* type : {"veth", "ifb"}) {
        Feature f{type, false, {}};
        // A loadable ifb module that is not loaded yet: say so rather than load it.
        if (std::string(type) == "ifb" && !std::filesystem::exists("/sys/module/ifb") && module_present("ifb")) {
            f.available = true;
            f.detail = "module present, not loaded (loading it creates ifb0 and ifb1)";
            out.push_back(f);
            continue;
        }
        rtnl_link* l = rtnl_link_alloc();
        rtnl_link_set_name(l, "wlprobe0");
        rtnl_link_set_type(l, type);
        int err = rtnl_link_add(s, l, NLM_F_CREATE | NLM_F_EXCL);
        if (err >= 0) {
            f.available = true;
            rtnl_link_delete(s, l);
        } else {
            f.detail = nl_geterror(err);
        }
        rtnl_link_put(l);
        out.push_back(f);
    }
    nl_socket_free(s);
}

}  // namespace

std::vector<Feature> probe_kernel_features() {
    std::vector<Feature> out;
    std::exception_ptr failure;
    // unshare() changes only this thread's namespace: do it on a thread of its own, whose
    // namespace (and everything made in it) is gone when the thread ends.
    std::thread t([&] {
        try {
            probe_in_scratch_namespace(out);
        } catch (...) {
            failure = std::current_exception();
        }
    });
    t.join();
    if (failure) std::rethrow_exception(failure);
    return out;
}

std::string advice_for(const std::string& feature) {
    if (feature == "netem")
        return "This kernel has no sch_netem. Fixes: `modprobe sch_netem`; RHEL/Fedora: install "
               "kernel-modules-extra; Ubuntu: install linux-modules-extra-$(uname -r); WSL2: a kernel built with "
               "CONFIG_NET_SCH_NETEM. Or use `wanlab vm run`, which brings a stock kernel that has it.";
    if (feature == "netem_seed")
        return "netem on this kernel ignores a seed (TCA_NETEM_PRNG_SEED came with Linux 6.6): remove `seed` from "
               "[link] to run with the kernel's own randomness, or use a 6.6+ kernel (Debian 12: bookworm-backports).";
    if (feature == "ifb")
        return "ifb (needed to impair incoming traffic in host mode) is missing: `modprobe ifb`, or install the "
               "same extra-modules package as for netem.";
    if (auto q = queue_named(feature); q && *q != Queue::pfifo && *q != Queue::bfifo)
        return fmt::format(
            "{} is missing: `modprobe sch_{}` (Debian and Fedora ship it as a module; RHEL: "
            "kernel-modules-extra); otherwise choose another `qdisc` that doctor lists, or run in "
            "`wanlab vm run`.",
            feature, feature);
    return {};
}

std::string ifb_autoload_problem() {
    std::error_code ec;
    if (std::filesystem::exists("/sys/module/ifb", ec) || !module_present("ifb")) return "";
    return "the ifb module is not loaded, and creating wanlab's ifb device would load it with its default of two "
           "extra devices, ifb0 and ifb1, left behind afterwards; load it without them first: `modprobe ifb numifbs=0`";
}

}  // namespace wanlab::netem
