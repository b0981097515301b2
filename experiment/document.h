// The experiment file as a document: merging overlays into it (variants, sweep points,
// --set), normalizing it (dotted sysctl names, sweep paths), and reading --set arguments.
// The first pass of loading; every later pass reads the merged document.
//
// Contract: a merge addresses [[probe]] and [[variant]] items by name (a probe without a
// name by its kind) and reports an unknown name at its key, with a guess. Pure; thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/diagnostic.h"

namespace wanlab::experiment {

/// Merges `overlay` into `base`: tables key by key, [[probe]]/[[variant]] items by name,
/// anything else replaced.
void merge_document(config::Node& base, const config::Node& overlay, Diagnostics& diag);

/// Dotted sysctl names to canonical form and [sweep] paths flattened ("link.rtt"), in the
/// document and in its variants.
void normalize(config::Node& doc, Diagnostics& diag);

/// The `n`th --set argument KEY=VALUE as a document (its source named "--set#n"); nullopt
/// with a located error when it is malformed.
std::optional<config::Node> parse_set(const std::string& arg, std::size_t n, config::Documents& docs,
                                      Diagnostics& diag);

/// Warns about each --set of a key the sweep also sets: the sweep point is applied last.
void warn_sets_under_sweep(const config::Node& doc, const std::vector<config::Node>& overlays, Diagnostics& diag);

}  // namespace wanlab::experiment
