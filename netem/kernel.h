// The narrow kernel interface netem/ works through: resolve a device, send a request and
// wait for the kernel's answer, dump a device's qdiscs or classes.
//
// Contract: NetlinkKernel is the real thing: one NETLINK_ROUTE socket, opened inside a
// network namespace if asked (the socket stays bound to that namespace for its life).
// send() throws wanlab::Error naming the request, the errno text and the kernel's own
// extended-ACK message ("replace netem 1: on wl-rs: No such file or directory (Specified
// qdisc kind is unknown)"). RecordingKernel is the fake for unit tests: it records every
// request and keeps a model of each device's qdiscs so read-back and restore can be tested
// without root. Neither is thread-safe; use one per thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "netem/encode.h"

struct nl_sock;

namespace wanlab::netem {

/// A qdisc's statistics as the kernel dumps them (TCA_STATS2: basic and queue): cumulative
/// counters since the qdisc was made, and the queue's length now.
struct TcStats {
    bool present = false;       ///< the message carried TCA_STATS2
    std::uint64_t bytes = 0;    ///< sent (dequeued)
    std::uint64_t packets = 0;  ///< sent; 64-bit when the kernel sends TCA_STATS_PKT64
    std::uint32_t drops = 0;    ///< dropped here, or below it (a parent counts its child's drops)
    std::uint32_t overlimits = 0;
    std::uint32_t requeues = 0;
    std::uint32_t qlen = 0;     ///< packets queued now (netem: including those in its delay line)
    std::uint32_t backlog = 0;  ///< bytes queued now
};

/// One qdisc or class as the kernel reports it (an RTM_NEWQDISC / RTM_NEWTCLASS message).
struct TcObject {
    std::string kind;
    int ifindex = 0;
    std::uint32_t handle = 0;
    std::uint32_t parent = 0;
    std::uint32_t info = 0;             ///< tcm_info: for a filter, priority << 16 | protocol (network order)
    std::vector<std::uint8_t> options;  ///< TCA_OPTIONS payload
    TcStats stats;                      ///< TCA_STATS2
    std::vector<std::uint8_t> message;  ///< the whole message, to replay it on restore
};

/// The first of `qdiscs` whose parent is `parent` (the shaper below netem at netem's 1:1, the
/// queue below a shaper), or null.
const TcObject* child_of(const std::vector<TcObject>& qdiscs, std::uint32_t parent);

/// What the kernel said about a failed request: errno and the extended-ACK text, if any.
struct AckError {
    int error = 0;
    std::string message;
};
/// Asks the kernel for extended ACKs on `sock` and has libnl's error callback record each
/// failed request's errno and message in `*out` (which must outlive the socket's use).
void capture_acks(nl_sock* sock, AckError* out);
/// "File exists (the kernel's message)" for a captured ack; libnl's text for `nl_err` when
/// the kernel sent no error (a local failure).
std::string ack_reason(const AckError& ack, int nl_err);

/// A NETLINK_ROUTE socket opened inside network namespace `netns` (a name; "" = this one)
/// with capture_acks(acks) set up; the caller frees it with nl_socket_free(). Throws
/// wanlab::Error.
nl_sock* open_route_socket(const std::string& netns, AckError* acks);

/// Parses one RTM_NEWQDISC / RTM_NEWTCLASS message.
TcObject parse_tc_message(const std::vector<std::uint8_t>& message);

class QdiscKernel {
public:
    virtual ~QdiscKernel() = default;
    /// The index of `dev`; throws wanlab::Error when there is no such device.
    virtual int ifindex(const std::string& dev) = 0;
    /// Sends `r` and waits for the acknowledgement.
    virtual void send(const Request& r) = 0;
    /// Every qdisc (classes = false) or class (true) of the device, in kernel order.
    virtual std::vector<TcObject> dump(int ifindex, bool classes) = 0;
    /// Every filter attached at `parent` of the device (such as the ingress hook ffff:).
    virtual std::vector<TcObject> dump_filters(int ifindex, std::uint32_t parent) = 0;
    /// Creates an ifb device `name`, up; returns its ifindex. Deletes a link by name.
    virtual int create_ifb(const std::string& name) = 0;
    virtual void delete_link(const std::string& name) = 0;
};

class NetlinkKernel final : public QdiscKernel {
public:
    /// `netns`: a namespace name (core/sys.h), or empty for the caller's namespace.
    explicit NetlinkKernel(const std::string& netns = {});
    ~NetlinkKernel() override;
    NetlinkKernel(const NetlinkKernel&) = delete;
    NetlinkKernel& operator=(const NetlinkKernel&) = delete;

    int ifindex(const std::string& dev) override;
    void send(const Request& r) override;
    std::vector<TcObject> dump(int ifindex, bool classes) override;
    std::vector<TcObject> dump_filters(int ifindex, std::uint32_t parent) override;
    int create_ifb(const std::string& name) override;
    void delete_link(const std::string& name) override;

private:
    std::vector<TcObject> dump_messages(int type, int ifindex, std::uint32_t parent, const char* what);
    nl_sock* sock_ = nullptr;
    AckError ack_;
};

}  // namespace wanlab::netem
