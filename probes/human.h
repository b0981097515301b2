// Metric values in human units, the one way wanlab writes a measurement for people: the
// report's tables, `wanlab probe`, explanations. Machines get base units (JSON, CSV).
//
// Contract: a value's scale (divisor, decimals, suffix) is chosen from the value itself, so
// an interval's bounds can be written in the scale of its median. Pure; thread-safe.
#pragma once

#include <string>

#include "probes/probe_spec.h"

namespace wanlab::probes {

/// How a value is written: divided by `divisor`, `decimals` places, then `suffix`.
struct Scale {
    double divisor = 1;
    int decimals = 0;
    const char* suffix = "";
    /// The number alone, in this scale: "34.28".
    std::string number(double v) const;
};

/// The scale for `v` of `unit`: Mbit/s from 1e6, ms below a second, KiB/MiB/GiB (no
/// decimals when whole: "208 KiB"), two significant places for small fractions.
Scale scale_for(Unit unit, double v);

/// "34.28 Mbit/s", "43.90 ms", "2260/s", "88.1%", "208 KiB"; "-" for NaN.
std::string human(Unit unit, double v);

}  // namespace wanlab::probes
