// Read-back: what the kernel holds, decoded from its own dump, compared field by field
// with what was asked. A mismatch is an error that names the field and both values.
//
// The kernel does not dump a delay distribution table, so a distribution is checked only
// for being present where jitter is; everything else netem, tbf, htb and the fifo queues
// take is compared. Pure (works on dumped bytes); thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "netem/attributes.h"
#include "netem/encode.h"
#include "netem/kernel.h"

namespace wanlab::netem {

/// Netem settings from a dumped TCA_OPTIONS payload, in Netem's units. Probabilities are
/// decoded from u32 (so compare with probability() of the asked value, not ==).
Netem decode_netem(const std::vector<std::uint8_t>& options, const Psched& psched);

/// Every netem field where the kernel differs from `asked` beyond its resolution (one
/// psched tick for times, one u32 step for probabilities), in attribute row order.
std::vector<Mismatch> compare_netem(const Netem& asked, const Netem& kernel);

/// The rate in bit/s of a dumped tbf qdisc or htb class, 0 if absent.
std::uint64_t decode_tbf_rate(const std::vector<std::uint8_t>& options);
std::uint64_t decode_htb_class_rate(const std::vector<std::uint8_t>& options);
/// The limit of a dumped pfifo/bfifo (packets or bytes).
std::uint32_t decode_fifo_limit(const std::vector<std::uint8_t>& options);

/// The attributes of a dumped options payload by type (flags masked); a malformed tail is
/// ignored. Shared by every decoder here and by netem/queue.cpp.
using NlAttrs = std::map<int, std::vector<std::uint8_t>>;
NlAttrs parse_attributes(const std::uint8_t* p, std::size_t size);

/// Dumps `dev` and checks that it holds exactly the tree tree_requests() builds for `d`.
/// Returns the mismatches (empty: the kernel holds what was asked).
std::vector<Mismatch> verify_tree(QdiscKernel& kernel, int ifindex, const Direction& d, const Psched& psched,
                                  const TreeLayout& layout = {});

/// "delay: asked 20ms, the kernel has 10ms; limit: asked 1000, the kernel has 500"
std::string describe(const std::vector<Mismatch>& m);

}  // namespace wanlab::netem
