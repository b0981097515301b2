// Link conditions of one emulated path: what netem and the shaper must do in each direction.
//
// Contract: LinkSpec is pure data in base units (nanoseconds, bit/s, bytes, fractions 0..1,
// packets). Words and defaults follow iproute2's tc-netem exactly, so a reader who knows
// `tc qdisc add ... netem delay 20ms 2ms 25% loss 1%` knows these fields. parse_link() reads
// a [link] table (with [link.up]/[link.down] overrides, `rtt` split over both directions);
// validate_link() applies the cross-field rules tc applies (gap needs reorder, ...) in a
// separate pass. Neither touches the kernel. Thread-safe (no shared state).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "core/config.h"
#include "core/diagnostic.h"

namespace wanlab::netem {

/// Packet loss. `random` is tc's plain `loss P [CORR]`; `gemodel` is Gilbert-Elliott with
/// tc's own parameters (p, r, 1-h, 1-k); `state` is the 4-state Markov model (p13 ... p14).
struct Loss {
    enum class Model { none, random, gemodel, state };
    Model model = Model::none;
    double probability = 0;  ///< random: loss probability; gemodel: p; state: p13
    double correlation = 0;  ///< random only
    double r = 0;            ///< gemodel: r (bad -> good); state: p31
    double one_minus_h = 0;  ///< gemodel: 1-h (loss probability in bad state); state: p32
    double one_minus_k = 0;  ///< gemodel: 1-k (loss probability in good state); state: p23
    double p14 = 0;          ///< state only

    bool operator==(const Loss&) const = default;
};

/// tc's `slot`: packets leave in bursts ("slots"), as on Wi-Fi or DOCSIS.
struct Slot {
    std::chrono::nanoseconds min_delay{0};
    std::chrono::nanoseconds max_delay{0};
    std::string distribution;  ///< empty, or a delay distribution for slot spacing
    std::chrono::nanoseconds dist_delay{0};
    std::chrono::nanoseconds dist_jitter{0};
    std::uint32_t packets = 0;  ///< 0 = unlimited
    std::uint32_t bytes = 0;    ///< 0 = unlimited

    bool operator==(const Slot&) const = default;
};

/// The netem qdisc of one direction.
struct Netem {
    std::chrono::nanoseconds delay{0};
    std::chrono::nanoseconds jitter{0};
    double delay_correlation = 0;
    /// "" (uniform jitter, the kernel default), "normal", "pareto", "paretonormal",
    /// "experimental", or a path to a user .dist table.
    std::string distribution;
    Loss loss;
    double duplicate = 0, duplicate_correlation = 0;
    double reorder = 0, reorder_correlation = 0;
    std::uint32_t gap = 0;
    double corrupt = 0, corrupt_correlation = 0;
    std::uint64_t rate_bps = 0;  ///< netem's own rate (shaper = "netem"); 0 = none
    std::int32_t packet_overhead = 0;
    std::uint32_t cell_size = 0;
    std::int32_t cell_overhead = 0;
    std::optional<Slot> slot;
    bool ecn = false;
    std::optional<std::uint32_t> limit;  ///< packets; nullopt = "auto"
    std::uint32_t limit_packets = 1000;  ///< resolved by resolve_limit()
    /// The seed of netem's own PRNG (TCA_NETEM_PRNG_SEED, Linux 6.6 and later): `seed` in
    /// [link], or derived from [run] seed, the trial and the direction (seed_for()), so the
    /// same file draws the same losses and delays. nullopt: the kernel picks one.
    std::optional<std::uint64_t> seed;
    bool seed_explicit = false;  ///< written as `seed`: a kernel that ignores it is an error

    bool operator==(const Netem&) const = default;
};

enum class Shaper { netem, tbf, htb };
/// The bottleneck queue below the shaper (netem/queue.h has each kind's parameters).
enum class Queue { none, pfifo, bfifo, fq_codel, cake, codel, pie, fq_pie, sfq, red, fq };
/// A queue's parameters by their tc word, in base units (ns, bytes, bit/s, fractions, 0/1).
using QueueParams = std::map<std::string, double>;

/// One direction of the path: netem, then the rate limit and its bottleneck queue.
struct Direction {
    Netem netem;
    Shaper shaper = Shaper::netem;
    std::uint64_t rate_bps = 0;  ///< the configured rate, whichever shaper carries it
    Queue queue = Queue::none;
    std::uint64_t queue_limit = 0;  ///< packets, or bytes (bfifo, red); 0 = default
    QueueParams queue_params;       ///< what `qdisc` as a table set besides `limit`
    /// Where each key that set this direction was written, for cross-field messages.
    std::map<std::string, Location> at;
    /// A [[link.schedule]] changes this direction during a measurement (netem/schedule.h): it
    /// gets a tree to change even when [link] leaves it clean.
    bool scheduled = false;

    bool impaired() const;  ///< anything other than a pass-through
    bool operator==(const Direction&) const = default;
};

/// cake sizes its queue in bytes of memory: a packet limit becomes this many bytes a packet.
inline constexpr std::uint64_t kCakeBytesPerPacket = 1514;

/// The size the bottleneck queue is given, in the kernel's unit: the limit for pfifo/bfifo
/// and fq_codel, queue_limit x kCakeBytesPerPacket (`memlimit`) for cake; 0 when the kernel's
/// default applies. Saturates at UINT32_MAX.
std::uint32_t queue_size(const Direction& d);

/// tbf's bucket for `rate_bps` on links of `mtu` bytes: the tokens of kTbfBurstTime at the
/// rate, and never under two full frames. tc-tbf(8) asks for at least rate/HZ; Debian's
/// kernels run at HZ = 250, so 4 ms. A smaller bucket caps the rate at bucket / (the time
/// between two of the qdisc's timer wake-ups) wherever the timer fires late: 1 ms of tokens
/// delivered 13 of 20 Mbit/s under the micro-VM's emulated CPU.
inline constexpr std::chrono::milliseconds kTbfBurstTime{4};
std::uint64_t tbf_burst(std::uint64_t rate_bps, std::uint32_t mtu);

/// netem's seed for one direction of one trial, from the run's seed: stable for the same
/// file (trial ids are), different between trials and directions (splitmix64 of the three).
std::uint64_t seed_for(std::uint64_t run_seed, const std::string& trial_id, const char* direction);

/// Both directions: `up` is client -> server, `down` is server -> client.
struct LinkSpec {
    Direction up;
    Direction down;
};

const char* to_string(Shaper s);
const char* to_string(Queue q);
const char* to_string(Loss::Model m);

/// Reads a [link] table. `section` names it in messages ("[link]", "[[variant]] \"x\" link").
/// The table's `profile` key must already have been merged in by the caller (lab/) and is
/// only accepted here.
LinkSpec parse_link(const config::Node& link, Diagnostics& diag);

/// Reports every problem of one written table of per-direction keys (unknown keys, bad
/// values) under `section`, keeping no value. `link_level`: the table is a whole [link] (it
/// may hold rtt, profile, up, down, schedule).
void check_link_keys(const config::Node& table, const std::string& section, Diagnostics& diag, bool link_level);

/// Cross-field rules, one message each, naming both keys: jitter without delay, gap without
/// reorder, reorder without delay, a correlation without its base, distribution without
/// jitter, ecn without loss, overheads without rate, qdisc without rate, ...
void validate_link(const LinkSpec& link, Diagnostics& diag);

/// Sizes the netem queue for `limit = "auto"`, and warns when an explicit limit is below the
/// bandwidth-delay product. `line_rate_bps` stands in for the rate when none is set (the
/// fastest the lab's links can deliver into the queue). `mtu` in bytes.
void resolve_limit(Direction& dir, std::uint64_t line_rate_bps, std::uint32_t mtu, Diagnostics& diag);

/// The netem limit that holds rate x (delay + jitter) with 50% headroom, never below tc's
/// default of 1000 packets.
std::uint32_t auto_limit(std::uint64_t rate_bps, std::chrono::nanoseconds delay, std::chrono::nanoseconds jitter,
                         std::uint32_t mtu);

}  // namespace wanlab::netem
