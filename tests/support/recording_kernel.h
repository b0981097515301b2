// RecordingKernel: the in-memory QdiscKernel of the unit tests. It records every request and
// models qdiscs, classes and filters per device the way the kernel treats them (a replace at a
// parent, a graft destroying the old subtree, filters deleted with their qdisc), so tests
// assert the exact netlink messages and the state a dump would show without root. Not
// thread-safe.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "netem/kernel.h"

namespace wanlab::netem {

/// Records requests and models qdiscs per device: a create-or-replace stores the object at
/// its (parent, handle), replacing what was there; deleting the root restores `defaults`.
class RecordingKernel final : public QdiscKernel {
public:
    std::map<std::string, int> devices{{"wl-rs", 7}, {"wl-rc", 8}, {"eth0", 2}};
    std::vector<Request> sent;
    /// Qdiscs per ifindex; the root starts as the kernel default (noqueue, handle 0).
    std::map<int, std::vector<TcObject>> qdiscs;
    std::map<int, std::vector<TcObject>> classes;
    std::map<int, std::vector<TcObject>> filters;
    /// If set, the next send() fails with this message (once).
    std::optional<std::string> fail_next;

    int ifindex(const std::string& dev) override;
    void send(const Request& r) override;
    std::vector<TcObject> dump(int ifindex, bool classes) override;
    std::vector<TcObject> dump_filters(int ifindex, std::uint32_t parent) override;
    int create_ifb(const std::string& name) override;
    void delete_link(const std::string& name) override;
    std::vector<std::string> link_log;  ///< "add ifb NAME", "delete NAME"
};

}  // namespace wanlab::netem
