#include "probes/human.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace wanlab::probes {
namespace {

bool integral(double v) { return std::fabs(v - std::round(v)) < 1e-9 * std::max(1.0, std::fabs(v)); }

Scale bytes_scale(double v) {
    double a = std::fabs(v);
    Scale s;
    if (a >= 1024.0 * 1024 * 1024)
        s = {1024.0 * 1024 * 1024, 1, " GiB"};
    else if (a >= 1024.0 * 1024)
        s = {1024.0 * 1024, 1, " MiB"};
    else if (a >= 1024)
        s = {1024, 1, " KiB"};
    else
        s = {1, 0, " B"};
    if (integral(v / s.divisor)) s.decimals = 0;  // "208 KiB", as sysctl users think of 212992
    return s;
}

}  // namespace

Scale scale_for(Unit unit, double v) {
    double a = std::fabs(v);
    switch (unit) {
        case Unit::bits_per_second:
            if (a >= 1e9) return {1e9, 2, " Gbit/s"};
            if (a >= 1e6) return {1e6, 2, " Mbit/s"};
            if (a >= 1e3) return {1e3, 1, " kbit/s"};
            return {1, 0, " bit/s"};
        case Unit::seconds:
            if (a >= 1) return {1, 3, " s"};
            if (a >= 1e-3) return {1e-3, 2, " ms"};
            return {1e-6, 1, " us"};
        // Loss and limited-time shares span 0.01% to 100%: keep two significant places.
        case Unit::fraction: return {0.01, a >= 0.1 || a == 0 ? 1 : a >= 0.001 ? 2 : 3, "%"};
        case Unit::count: return {1, integral(v) ? 0 : 1, ""};
        case Unit::per_second: return {1, a >= 100 ? 0 : 2, "/s"};
        case Unit::bytes: return bytes_scale(v);
    }
    return {};
}

std::string Scale::number(double v) const { return fmt::format("{:.{}f}", v / divisor, decimals); }

std::string human(Unit unit, double v) {
    if (std::isnan(v)) return "-";
    auto s = scale_for(unit, v);
    return s.number(v) + s.suffix;
}

}  // namespace wanlab::probes
