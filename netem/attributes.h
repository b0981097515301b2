// The per-direction [link] keys, one row each in one table. Every face of a key comes from its
// row: how it is read from a [link] table, put into and read out of the kernel's netem
// options, compared after read-back, printed as tc arguments and as plan JSON, offered as a
// `wanlab link` flag, and carried in the JSON a run across machines sends `wanlab agent`
// (remote/protocol.h). Adding a netem attribute is one row here (and, if the kernel carries
// it in a struct wanlab does not send yet, one field of NetemWire and its line in
// encode.cpp's serializer and readback.cpp's parser).
//
// Contract: rows are in the order keys are parsed and read-back mismatches are reported;
// tc_rank orders the tc arguments as tc prints them. A face is null where the key has none:
// shaper, qdisc and qdisc_limit build qdiscs of their own below netem (encode.h), a
// distribution table is never dumped by the kernel, and tc prints some values only as
// positional arguments of another key (jitter and correlation after delay, the overheads
// after rate, gap after reorder), whose tc face prints them. Pure; thread-safe.
#pragma once

#include <linux/pkt_sched.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "netem/encode.h"
#include "netem/link_spec.h"

namespace wanlab::netem {

/// The longest delay wanlab sends. qopt carries 2^32 psched ticks of 64 ns (274.9 s); longer
/// ones (from 2^32 ns on, as tc) travel as TCA_NETEM_LATENCY64 / JITTER64 in nanoseconds,
/// which kernels since 4.15 read. A day is config's ceiling on any duration.
inline constexpr std::chrono::nanoseconds kMaxDelay{std::chrono::hours(24)};

/// TCA_NETEM_PRNG_SEED (u64), Linux 6.6; Debian 12's uapi headers stop at SLOT_DIST.
inline constexpr int kNetemPrngSeed = 14;

/// A field where the kernel holds something other than what was asked.
struct Mismatch {
    std::string field;
    std::string asked;
    std::string kernel;
};

/// The kernel's netem options as the structs they travel in: what encode.cpp serializes
/// after qopt and readback.cpp parses out of a dump.
struct NetemWire {
    tc_netem_qopt qopt{};
    tc_netem_corr corr{};
    tc_netem_reorder reorder{};
    tc_netem_corrupt corrupt{};
    std::optional<tc_netem_gemodel> gemodel;  ///< TCA_NETEM_LOSS / NETEM_LOSS_GE
    std::optional<tc_netem_gimodel> gimodel;  ///< TCA_NETEM_LOSS / NETEM_LOSS_GI
    tc_netem_rate rate{};
    std::optional<std::uint64_t> rate64;  ///< bytes/s; sent only above UINT32_MAX
    std::uint32_t ecn = 0;
    std::optional<tc_netem_slot> slot;      ///< always sent (zero without a slot)
    std::optional<std::int64_t> latency64;  ///< ns; sent from 2^32 ns on (as tc), always dumped
    std::optional<std::int64_t> jitter64;
    std::optional<std::uint64_t> prng_seed;  ///< kNetemPrngSeed; dumped by kernels that have it
};

struct Attribute {
    const char* key;  ///< the [link] key, the `wanlab link --KEY` flag, the plan JSON key
    bool flag;        ///< offered as a `wanlab link` flag (tables such as slot are not)
    int tc_rank;      ///< position among netem's tc arguments; -1: printed by another row
    /// Reads the key from a [link] table into `d` (values in base units, located errors).
    void (*parse)(const Attribute& self, config::Reader& r, Direction& d);
    /// Puts the value into the kernel's structs.
    void (*encode)(const Netem& n, const Psched& psched, NetemWire& w);
    /// Reads it back out of a dump.
    void (*decode)(const NetemWire& w, const Psched& psched, Netem& n);
    /// Appends a Mismatch when the kernel's value differs beyond its resolution.
    void (*compare)(const Attribute& self, const Netem& asked, const Netem& kernel, std::vector<Mismatch>& out);
    /// Appends " word value..." as tc writes it (nothing when unset).
    void (*tc)(const Netem& n, std::string& out);
    /// Sets the key (and any companion key) in a direction's plan JSON, in base units.
    void (*json)(const Attribute& self, const Direction& d, nlohmann::json& j);
    /// Writes the value, exactly (durations in ns), into a direction's JSON for `wanlab agent`
    /// (remote/protocol.h): netem's fields under "netem", the shaper's and queue's beside it.
    void (*send)(const Attribute& self, const Direction& d, nlohmann::json& j);
    /// Reads it back out of that JSON; throws nlohmann::json::exception, or wanlab::Error for
    /// a value no row takes.
    void (*receive)(const Attribute& self, const nlohmann::json& j, Direction& d);
};

/// Every per-direction [link] key, in parse order.
std::span<const Attribute> attributes();

/// The kernel's structs for `n` (every row's encode face).
NetemWire to_wire(const Netem& n, const Psched& psched);
/// The Netem a dump holds (every row's decode face).
Netem from_wire(const NetemWire& w, const Psched& psched);

/// A direction as it travels to `wanlab agent` (every row's send face), without `at`, the
/// controller's source locations. Agent protocol 1's layout.
nlohmann::json to_agent_json(const Direction& d);
/// The direction such JSON holds (every row's receive face); throws nlohmann::json::exception,
/// or wanlab::Error for an unknown loss model, shaper or queue.
Direction from_agent_json(const nlohmann::json& j);

}  // namespace wanlab::netem
