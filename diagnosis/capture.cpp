#include "diagnosis/capture.h"

#include <pcap/pcap.h>
#include <poll.h>

#include <cerrno>
#include <cstdio>
#include <variant>

#include <fmt/format.h>

#include "core/error.h"
#include "core/sys.h"
#include "core/units.h"

namespace wanlab::diagnosis {
namespace {

constexpr std::uint64_t kFileHeader = 24;    // pcap's global header
constexpr std::uint64_t kRecordHeader = 16;  // per packet
constexpr int kBufferBytes = 4 << 20;        // the kernel's ring for this socket
constexpr int kPollMs = 50;                  // how soon a stop is noticed

pcap_dumper_t* as_dumper(void* d) { return static_cast<pcap_dumper_t*>(d); }

}  // namespace

std::optional<CaptureBounds> capture_bounds(const probes::ProbeSpec& spec) {
    auto get = [&spec](const char* name) -> std::int64_t {
        auto it = spec.options.find(name);
        return it != spec.options.end() && std::holds_alternative<std::int64_t>(it->second)
                   ? std::get<std::int64_t>(it->second)
                   : 0;
    };
    auto on = spec.options.find("capture");
    bool asked = on != spec.options.end() && std::holds_alternative<bool>(on->second) && std::get<bool>(on->second);
    CaptureBounds b;
    b.max_packets = static_cast<std::uint64_t>(get("capture_packets"));
    if (auto bytes = get("capture_bytes"); bytes > 0) b.max_bytes = static_cast<std::uint64_t>(bytes);
    if (auto snap = get("capture_snaplen"); snap > 0) b.snaplen = static_cast<int>(snap);
    if (!asked && b.max_packets == 0 && get("capture_bytes") == 0) return std::nullopt;
    return b;
}

Capture::Capture(std::string host, std::string netns, std::string dev, const std::string& filter,
                 std::filesystem::path file, CaptureBounds bounds)
    : host_(std::move(host)), dev_(std::move(dev)), file_(std::move(file)), bounds_(bounds) {
    char err[PCAP_ERRBUF_SIZE] = {};
    auto what = [&](const std::string& msg) {
        return Error(fmt::format("capturing on {} ({}): {}", dev_, host_, msg));
    };
    // The packet socket is made, and bound to the device, in the host's namespace.
    pcap_ = sys::in_netns_result(netns, [&]() -> pcap* {
        pcap* p = pcap_create(dev_.c_str(), err);
        if (!p) return nullptr;
        pcap_set_snaplen(p, bounds_.snaplen);
        pcap_set_promisc(p, 0);
        pcap_set_immediate_mode(p, 1);
        pcap_set_buffer_size(p, kBufferBytes);
        if (int rc = pcap_activate(p); rc < 0) {
            std::snprintf(err, sizeof err, "%s", pcap_geterr(p));
            if (err[0] == '\0') std::snprintf(err, sizeof err, "%s", pcap_statustostr(rc));
            pcap_close(p);
            return nullptr;
        }
        return p;
    });
    if (!pcap_) throw what(err);
    auto fail = [&](const std::string& msg) {
        pcap_close(pcap_);
        pcap_ = nullptr;
        return what(msg);
    };
    if (!filter.empty()) {
        bpf_program program{};
        if (pcap_compile(pcap_, &program, filter.c_str(), 1, PCAP_NETMASK_UNKNOWN) != 0)
            throw fail(fmt::format("filter \"{}\": {}", filter, pcap_geterr(pcap_)));
        int rc = pcap_setfilter(pcap_, &program);
        pcap_freecode(&program);
        if (rc != 0) throw fail(fmt::format("filter \"{}\": {}", filter, pcap_geterr(pcap_)));
    }
    if (pcap_setnonblock(pcap_, 1, err) != 0) throw fail(err);
    dumper_ = pcap_dump_open(pcap_, file_.c_str());
    if (!dumper_) throw fail(fmt::format("writing {}: {}", file_.string(), pcap_geterr(pcap_)));
    bytes_ = kFileHeader;
    thread_ = std::thread([this] { loop(); });
}

Capture::~Capture() {
    stop();
    close();
}

void Capture::close() {
    if (pcap_) {
        pcap_stat st{};
        if (pcap_stats(pcap_, &st) == 0) dropped_ = st.ps_drop;
    }
    if (dumper_) pcap_dump_close(as_dumper(dumper_));
    if (pcap_) pcap_close(pcap_);
    dumper_ = nullptr;
    pcap_ = nullptr;
}

void Capture::loop() {
    auto on_packet = [](u_char* self, const pcap_pkthdr* h, const u_char* data) {
        auto* c = reinterpret_cast<Capture*>(self);
        std::uint64_t size = kRecordHeader + h->caplen;
        if (c->bounds_.max_packets > 0 && c->packets_ >= c->bounds_.max_packets)
            c->stopped_ = fmt::format("capture_packets = {} reached", c->bounds_.max_packets);
        else if (c->bytes_ + size > c->bounds_.max_bytes)
            c->stopped_ = fmt::format("capture_bytes = {} reached", units::format_size(c->bounds_.max_bytes));
        if (!c->stopped_.empty()) {
            pcap_breakloop(c->pcap_);
            return;
        }
        pcap_dump(reinterpret_cast<u_char*>(c->dumper_), h, data);
        ++c->packets_;
        c->bytes_ += size;
    };
    auto* self = reinterpret_cast<u_char*>(this);
    pollfd pfd{pcap_get_selectable_fd(pcap_), POLLIN, 0};
    while (!stopping_.load() && stopped_.empty()) {
        if (::poll(&pfd, 1, kPollMs) < 0 && errno != EINTR) break;
        if (pcap_dispatch(pcap_, -1, on_packet, self) < 0) break;  // the device went away, or a bound
    }
    if (stopped_.empty()) pcap_dispatch(pcap_, -1, on_packet, self);  // what is left in the ring
    // A bound reached closes the socket at once: copying every later packet to a capture
    // that keeps none would only slow the measurement down.
    close();
}

void Capture::stop() {
    stopping_ = true;
    if (thread_.joinable()) thread_.join();
}

results::Capture Capture::finish() {
    stop();
    close();
    results::Capture c;
    c.host = host_;
    c.dev = dev_;
    c.path = file_.string();
    c.packets = packets_;
    c.bytes = bytes_;
    c.dropped = dropped_;
    c.stopped = stopped_;
    return c;
}

}  // namespace wanlab::diagnosis
