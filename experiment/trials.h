// Expansion of an experiment into trials: sweep points (cross product or zip) times
// variants, each merged into the base document and parsed into a concrete Trial.
//
// Contract: trials are ordered sweep point by sweep point, and within each point variant by
// variant, so a baseline and its variants are measured back to back under the same
// conditions (drift in the machine affects them alike). A trial's id is a hash of its
// variant and sweep values only, so it stays the same when other trials are added or
// reordered. Used by load_experiment(); each trial's document is read by sections.h.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/config.h"
#include "experiment/experiment.h"

namespace wanlab::experiment {

/// One point of the sweep: a value for each swept path.
struct SweepPoint {
    std::vector<std::pair<std::string, config::Node>> values;
    /// Per value, the name the file gave it (`"link.rtt" = { near = "20ms", far = "80ms" }`),
    /// "" for a value of a plain list. A named value is labelled by its name everywhere.
    std::vector<std::string> names;
};

/// Validates [sweep] (paths, lists, mode, trial count) and lists its points; fills
/// exp.sweep_keys and exp.sweep_mode. With no sweep, one empty point.
std::vector<SweepPoint> sweep_points(const config::Node* sweep, Experiment& exp, Diagnostics& diag);

/// Every (point, variant) pair as a Trial. `implicit_variant`: the experiment declares no
/// [[variant]], so the single "default" variant has no overrides. `made`: variants made in
/// code, in place of the document's (load_experiment()).
std::vector<Trial> expand_trials(const config::Node& doc, const Experiment& exp, const std::vector<SweepPoint>& points,
                                 bool implicit_variant, const ProfileLibrary& profiles, config::Documents& docs,
                                 Diagnostics& diag, const std::vector<MadeVariant>* made = nullptr);

/// Whether `path` is a key [sweep] (and [tune.space], `section` in messages) can vary:
/// link., sysctl., probe.NAME.OPTION, service.NAME.KEY or lab.; an error at `entry` if not.
bool check_key_path(const std::string& path, const config::Node& entry, const char* section, Diagnostics& diag);

/// "40ms", "[4096, 131072]", "true": a leaf as a short text for tables and ids.
std::string value_text(const config::Node& leaf);

}  // namespace wanlab::experiment
