// Bandwidth-delay advice: which socket buffer maxima a trial's bulk transfers ran under are
// short of twice the path's bandwidth-delay product, and the size to set instead.
//
// Contract: pure, from the results model. Only a maximum that could have limited the
// transfers measured is named: tcp_rmem / tcp_wmem for a buffer the kernel autotuned,
// rmem_max / wmem_max for one a probe asked for (SO_RCVBUF, iperf3 -w), and of a per-host key
// only the host that received or sent. The trial's own values, else (for a key it did not set)
// the host's before the run. Thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "results/model.h"

namespace wanlab::diagnosis {

/// One buffer key's value that applied to the trial and is below twice the BDP.
struct ShortBuffer {
    std::string key;                    ///< "net.core.rmem_max", "net.ipv4.tcp_wmem", ...
    bool triple = false;                ///< "min default max" (tcp_rmem, tcp_wmem)
    std::string host;                   ///< "" for a global key, else the lab host it was set on
    std::vector<std::uint64_t> fields;  ///< bytes, as set; the last is the maximum
    bool before = false;                ///< not set by the trial: the host's value before the run
    bool below_bdp = false;             ///< below the BDP itself, not only below twice it
};

struct BufferAdvice {
    double bdp_bytes = 0;                    ///< the configured rate x RTT / 8
    std::uint64_t target_bytes = 0;          ///< the power of two at or above 2 x BDP
    std::vector<ShortBuffer> short_buffers;  ///< rmem_max, tcp_rmem, wmem_max, tcp_wmem; never empty
};

/// The advice for trial `t` whose bulk transfers' repeats are `bulk`; nullopt when it has no
/// configured rate and RTT, no bulk transfer, or no maximum short of 2 x BDP.
std::optional<BufferAdvice> buffer_advice(const results::RunData& data, const results::Trial& t,
                                          const std::vector<const results::Measurement*>& bulk);

}  // namespace wanlab::diagnosis
