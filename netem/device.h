// DeviceQdiscs: wanlab's hold on one device's qdiscs.
//
// Creates: on construction, a snapshot of the device's root qdisc tree (qdiscs and classes,
// as the kernel dumps them). apply() puts a Direction's tree on the device with
// create-or-replace requests only (moving between trials never deletes first, so traffic
// is never blackholed) and reads it back; a mismatch throws naming the field.
// Undoes: restore() (and the destructor) give the device back its snapshot: the kernel's
// default qdisc if it had one (by deleting ours), or the exact tree it had, replayed from
// the snapshot. The destructor never throws; it reports a failed restore on stderr.
// Move-only. Not thread-safe.
#pragma once

#include <string>
#include <vector>

#include "netem/encode.h"
#include "netem/kernel.h"

namespace wanlab::netem {

class DeviceQdiscs {
public:
    DeviceQdiscs(QdiscKernel& kernel, std::string dev);
    ~DeviceQdiscs();
    DeviceQdiscs(DeviceQdiscs&& other) noexcept;
    DeviceQdiscs& operator=(DeviceQdiscs&&) = delete;
    DeviceQdiscs(const DeviceQdiscs&) = delete;
    DeviceQdiscs& operator=(const DeviceQdiscs&) = delete;

    /// Replaces the device's tree with `d`'s and verifies it by read-back.
    void apply(const Direction& d, std::uint32_t mtu, const Psched& psched, const TreeLayout& layout = {});
    /// Sends requests that change the device (apply() uses it; tests and the host-mode
    /// filter use it for other trees). The snapshot is restored all the same.
    void apply_requests(const std::vector<Request>& requests);
    /// Gives the device back what it had. Idempotent.
    void restore();
    /// Forget the snapshot without restoring (the tree stays).
    void release() { active_ = false; }
    /// True when the device may differ from the snapshot (restore() has work to do).
    bool changed() const { return active_ && changed_; }

    const std::vector<TcObject>& snapshot_qdiscs() const { return qdiscs_; }
    const std::vector<TcObject>& snapshot_classes() const { return classes_; }
    /// True when the snapshot's root is the kernel's own default (handle 0).
    bool default_root() const;

    /// The snapshot as text (one hex message per line), to persist across processes, and
    /// back. `wanlab link clear` restores from a saved snapshot.
    std::string serialize() const;
    static DeviceQdiscs from_serialized(QdiscKernel& kernel, std::string dev, const std::string& text);

private:
    DeviceQdiscs(QdiscKernel& kernel, std::string dev, std::vector<TcObject> qdiscs, std::vector<TcObject> classes);
    QdiscKernel* kernel_;
    std::string dev_;
    int ifindex_;
    std::vector<TcObject> qdiscs_;
    std::vector<TcObject> classes_;
    bool active_ = true;
    bool changed_ = false;
};

/// A dumped qdisc or class turned back into a request that recreates it exactly (kind and
/// options; statistics dropped).
Request replay_request(const TcObject& o, bool is_class, const std::string& dev);

}  // namespace wanlab::netem
