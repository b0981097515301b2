// Packet captures: what one lab host's device sent and received while a probe measured,
// written as a pcap file through libpcap, headers only by default, bounded in size.
//
// Contract: the capture opens its device inside the host's network namespace (a packet
// socket stays in the namespace it was made in), so the constructor throws wanlab::Error
// with libpcap's words when the device cannot be captured (no such device, no permission).
// It then writes from its own thread until finish() or destruction: every packet truncated
// to `snaplen` bytes, until `max_packets` or `max_bytes` (the file's size) is reached, when
// it closes the socket (copying packets it would not keep only slows the measurement). The
// file is complete (flushed, closed) when finish() returns. Capturing costs CPU per packet:
// a bulk transfer of several Gbit/s over a bare veth is measured slower while it captures.
// Not thread-safe: one owner.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>

#include "probes/probe_spec.h"
#include "results/model.h"

struct pcap;

namespace wanlab::diagnosis {

/// The default bound on a capture file's size when the probe names none.
inline constexpr std::uint64_t kDefaultCaptureBytes = 64ull << 20;
/// Bytes kept of each packet by default: Ethernet, IPv4 or IPv6 and TCP with options.
inline constexpr int kHeaderSnaplen = 128;

struct CaptureBounds {
    std::uint64_t max_packets = 0;                   ///< 0: no packet bound
    std::uint64_t max_bytes = kDefaultCaptureBytes;  ///< the file's size at most
    int snaplen = kHeaderSnaplen;                    ///< bytes kept of each packet
};

/// The bounds a probe asks for with its capture options, or nullopt when it captures nothing
/// (`capture` false and neither bound set).
std::optional<CaptureBounds> capture_bounds(const probes::ProbeSpec& spec);

/// Capture: one pcap file of device `dev` in namespace `netns`.
/// Creates: a packet socket (libpcap), the file, a thread. Undoes: stops the thread, closes
/// the socket and the file (the file stays: it is the result).
class Capture {
public:
    /// `filter`: a pcap filter expression ("host 192.0.2.7"); "" keeps every packet.
    Capture(std::string host, std::string netns, std::string dev, const std::string& filter, std::filesystem::path file,
            CaptureBounds bounds);
    ~Capture();
    Capture(const Capture&) = delete;
    Capture& operator=(const Capture&) = delete;

    /// Stops and closes; what was written (path as given; the caller may make it relative).
    results::Capture finish();

private:
    void loop();
    void stop();
    void close();  ///< the kernel's drop count, then the file and the socket

    std::string host_, dev_;
    std::filesystem::path file_;
    CaptureBounds bounds_;
    pcap* pcap_ = nullptr;
    void* dumper_ = nullptr;  // pcap_dumper_t
    std::uint64_t packets_ = 0, bytes_ = 0, dropped_ = 0;
    std::string stopped_;
    std::atomic<bool> stopping_{false};
    std::thread thread_;
};

}  // namespace wanlab::diagnosis
