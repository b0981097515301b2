// Kernel settings an experiment asks for: which net.* sysctls, with which values, on which
// lab host.
//
// Contract: parse_sysctls() reads a [sysctl] table whose keys have been flattened to dotted
// names (normalize_sysctl_table), with [sysctl.client] / [sysctl.server] / [sysctl.router]
// overrides. Plain [sysctl] keys apply to the endpoints (client and server). Values are
// checked for shape here (integer, byte size, triplet, string); whether the running kernel
// has the key and accepts the value is checked before applying, by the lab. Each key knows
// its scope: a global key (net.core.rmem_max) is one value for the whole machine even in a
// namespace lab, so client and server cannot ask for different values. Pure; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/diagnostic.h"

namespace wanlab::sysctl {

enum class Scope { global, per_namespace, unknown };
enum class Shape { integer, bytes, triplet_bytes, triplet_pages, pair, string, boolean };

/// What wanlab knows about a key; unknown net.* keys are allowed with Scope::unknown and are
/// checked against the kernel before the run.
struct KeyInfo {
    const char* key;
    Shape shape;
    Scope scope;
    const char* meaning;
};

/// Whether `key` is a canonical net.* sysctl name: "net." then lowercase letters, digits,
/// `_` and `-` in non-empty dot-separated components, at most 255 bytes.
bool valid_key_syntax(std::string_view key);

/// nullptr for a key wanlab has no table entry for.
const KeyInfo* lookup(std::string_view key);

/// One setting, its value as /proc/sys takes it ("4096 131072 6291456", "bbr", "67108864").
struct Setting {
    std::string key;
    std::string value;
    Scope scope = Scope::unknown;
    Location at;  ///< the value as written
};

/// Resolved settings per lab host ("client", "router", "server"; "host" in host mode).
/// Global keys appear once, under `global`.
struct SysctlSpec {
    std::vector<Setting> global;
    std::map<std::string, std::vector<Setting>> per_host;
    /// Every key named anywhere, for sweep/--set path checks and plan listings.
    bool empty() const;
};

/// Turns nested tables ([sysctl.net.core] rmem_max = 1) into dotted keys
/// ("net.core.rmem_max"), keeping host sub-tables and `profile`. Reports a key given twice.
void normalize_sysctl_table(config::Node& sysctl, Diagnostics& diag);

/// `hosts` are the lab's hosts ("client", "router", "server", or just "host").
SysctlSpec parse_sysctls(const config::Node& sysctl, const std::vector<std::string>& hosts, Diagnostics& diag);

}  // namespace wanlab::sysctl
