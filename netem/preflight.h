// Preflight: which qdiscs and devices the running kernel really supports, found by trying
// each one in a scratch network namespace that disappears afterwards (nothing on the host
// is touched). Users on kernels without sch_netem (WSL2, RHEL without
// kernel-modules-extra, minimal CI kernels) get told so, with the fix for their system.
#pragma once

#include <string>
#include <vector>

namespace wanlab::netem {

struct Feature {
    std::string name;  ///< "netem", "tbf", "ifb", ...
    bool available = false;
    std::string detail;  ///< the kernel's answer when not available
};

/// Tries every qdisc kind and device type wanlab can use. Needs CAP_NET_ADMIN and
/// CAP_SYS_ADMIN (to make the scratch namespace); throws wanlab::Error otherwise.
std::vector<Feature> probe_kernel_features();

/// Why creating an ifb device here would leave devices behind, "" if it would not: the ifb
/// module is loadable but not loaded, and the kernel loading it on demand also creates ifb0
/// and ifb1 (numifbs=2), which nobody asked for.
std::string ifb_autoload_problem();

/// What to do about a missing feature on common systems (multi-line), "" if nothing to say.
std::string advice_for(const std::string& feature);

}  // namespace wanlab::netem
