// NetNamespace: a named network namespace, made the way `ip netns add NAME` makes one, so
// `ip netns exec NAME ...` and `ip netns list` see it while wanlab runs.
//
// Creates: /run/netns/NAME, a bind mount of a fresh network namespace onto it (journaled
// first when a Journal is given). Undoes: SIGKILL to every process still inside (wanlab's
// namespaces hold only its own processes), then unmounts and unlinks it; the kernel then
// frees the namespace and every virtual device in it (veth ends go with their peers). The destructor never throws.
// Move-only; not thread-safe.
#pragma once

#include <string>

namespace wanlab::lab {

class Journal;

class NetNamespace {
public:
    /// Throws wanlab::Error if NAME exists already or the namespace cannot be made.
    NetNamespace(std::string name, Journal* journal);
    ~NetNamespace();
    NetNamespace(NetNamespace&& o) noexcept : name_(std::move(o.name_)), journal_(o.journal_) { o.name_.clear(); }
    NetNamespace& operator=(NetNamespace&&) = delete;
    NetNamespace(const NetNamespace&) = delete;
    NetNamespace& operator=(const NetNamespace&) = delete;

    const std::string& name() const { return name_; }

    /// True if /run/netns/NAME exists.
    static bool exists(const std::string& name);
    /// Like `ip netns del NAME`; does nothing when it is already gone. Throws wanlab::Error.
    static void remove(const std::string& name);

private:
    std::string name_;
    Journal* journal_;
};

}  // namespace wanlab::lab
