// The bottleneck queue below the shaper: its kinds, their parameters in tc's words, and every
// face of a parameter, one row each: how `qdisc` reads it, how it travels to the kernel and
// back, how a read-back is compared, how tc would write it.
//
// `qdisc` is a kind ("fq_codel") or a table naming the kind and its parameters:
//     qdisc = { kind = "pie", target = "20ms", tupdate = "30ms", ecn = true }
// `limit` in the table is the old `qdisc_limit`. A parameter left out is the kernel's default:
// nothing survives from the trial before, since each trial grafts its queue whole at the
// other of two handles (netem/device.cpp).
//
// Contract: values live in QueueParams in base units (ns, bytes, packets, bit/s, fractions,
// 0/1 for flags). Pure; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/config.h"
#include "netem/link_spec.h"

namespace wanlab::netem {

struct Psched;
struct Mismatch;

/// What a parameter's value is, which says how it is read and printed.
enum class QueueUnit { packets, bytes, duration, flag, rate, fraction, count };

/// One parameter of one or more queue kinds.
struct QueueParam {
    const char* key;  ///< the key in a `qdisc` table, and tc's word for it
    QueueUnit unit;
    double lo, hi;     ///< the range the kernel takes, in base units
    const char* help;  ///< one line for docs and messages
};

/// A queue kind: its name and the parameters it takes besides `limit`.
struct QueueKind {
    Queue queue;
    const char* name;
    QueueUnit limit_unit;  ///< packets, or bytes (bfifo, red)
    std::vector<const QueueParam*> params;
};

/// Every kind, in the order of `Queue`.
std::span<const QueueKind> queue_kinds();
const QueueKind& queue_kind(Queue q);
std::optional<Queue> queue_named(std::string_view name);
/// The names, for messages and choices ("none", "pfifo", ...).
std::vector<std::string> queue_names();

/// Reads `qdisc` (a name or a table) and `qdisc_limit` into `d`. Errors are located.
void parse_queue(config::Reader& r, Direction& d);

/// Cross-field rules of the queue's parameters (red's min < max < limit, ...).
void validate_queue(const Direction& d, Diagnostics& diag);

/// The TCA_OPTIONS payload for `d`'s queue (without the attribute header); empty when the
/// kind takes no options. red's default bandwidth is `d`'s rate (the shaper's).
std::vector<std::uint8_t> queue_options(const Direction& d, const Psched& psched);

/// The parameters (and limit, as `limit`) a dumped queue of `kind` holds, in base units.
QueueParams decode_queue(const std::string& kind, const std::vector<std::uint8_t>& options);

/// What differs between the asked queue and a dump of it, within the kernel's resolution.
std::vector<Mismatch> compare_queue(const Direction& asked, const QueueParams& kernel);

/// tc's words after the kind: " limit 100 target 5ms ecn".
std::string queue_tc_arguments(const Direction& d);

/// The parameters as JSON-ready pairs (key, value in base units), for plan and the wire.
std::vector<std::pair<std::string, double>> queue_param_list(const Direction& d);

/// red's derived parameters, as tc computes them (tc_red.c): what the kernel is sent.
struct RedWire {
    std::uint32_t limit, qth_min, qth_max;  ///< bytes
    std::uint8_t wlog, plog, scell_log;
    std::uint32_t max_p;
    std::vector<std::uint8_t> stab;  ///< 256 bytes
    std::uint8_t flags;
};
RedWire red_wire(const Direction& d, const Psched& psched);

}  // namespace wanlab::netem
