#include "sysctl/sysctl_spec.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <mutex>
#include <unordered_map>

#include <fmt/format.h>

#include "core/units.h"

namespace wanlab::sysctl {
namespace {

using config::Node;

const std::vector<KeyInfo> kKeys{
    // Global even inside a namespace lab (net_core_table is registered for init_net only).
    {"net.core.rmem_max", Shape::bytes, Scope::global, "largest SO_RCVBUF an application may ask for"},
    {"net.core.wmem_max", Shape::bytes, Scope::global, "largest SO_SNDBUF an application may ask for"},
    {"net.core.rmem_default", Shape::bytes, Scope::global, "default receive buffer of non-TCP sockets"},
    {"net.core.wmem_default", Shape::bytes, Scope::global, "default send buffer of non-TCP sockets"},
    {"net.core.netdev_max_backlog", Shape::integer, Scope::global, "packets queued on input per CPU"},
    {"net.core.optmem_max", Shape::bytes, Scope::global, "ancillary buffer per socket"},
    {"net.core.default_qdisc", Shape::string, Scope::global, "qdisc new devices get"},
    {"net.ipv4.tcp_mem", Shape::triplet_pages, Scope::global, "TCP memory pressure thresholds (pages)"},
    {"net.ipv4.udp_mem", Shape::triplet_pages, Scope::global, "UDP memory pressure thresholds (pages)"},
    {"net.ipv4.tcp_low_latency", Shape::boolean, Scope::global, "obsolete; no effect since 4.14"},
    // Per network namespace.
    {"net.core.somaxconn", Shape::integer, Scope::per_namespace, "listen() backlog cap"},
    {"net.ipv4.tcp_rmem", Shape::triplet_bytes, Scope::per_namespace,
     "TCP receive buffer min/default/max (autotuning bound)"},
    {"net.ipv4.tcp_wmem", Shape::triplet_bytes, Scope::per_namespace,
     "TCP send buffer min/default/max (autotuning bound)"},
    {"net.ipv4.tcp_congestion_control", Shape::string, Scope::per_namespace, "default congestion control"},
    {"net.ipv4.tcp_window_scaling", Shape::boolean, Scope::per_namespace, "RFC 7323 window scaling"},
    {"net.ipv4.tcp_timestamps", Shape::integer, Scope::per_namespace, "RFC 7323 timestamps"},
    {"net.ipv4.tcp_sack", Shape::boolean, Scope::per_namespace, "selective acknowledgements"},
    {"net.ipv4.tcp_dsack", Shape::boolean, Scope::per_namespace, "duplicate SACKs"},
    {"net.ipv4.tcp_synack_retries", Shape::integer, Scope::per_namespace, "SYN-ACK retransmissions"},
    {"net.ipv4.tcp_retries1", Shape::integer, Scope::per_namespace, "retransmissions before reporting to IP"},
    {"net.ipv4.tcp_frto", Shape::integer, Scope::per_namespace, "forward RTO-recovery"},
    {"net.ipv4.tcp_thin_linear_timeouts", Shape::boolean, Scope::per_namespace, "linear timeouts for thin streams"},
    {"net.ipv4.tcp_ecn", Shape::integer, Scope::per_namespace, "ECN negotiation (0, 1, 2)"},
    {"net.ipv4.tcp_no_metrics_save", Shape::boolean, Scope::per_namespace,
     "forget cwnd/ssthresh of closed connections"},
    {"net.ipv4.tcp_slow_start_after_idle", Shape::boolean, Scope::per_namespace, "restart slow start after idle"},
    {"net.ipv4.tcp_mtu_probing", Shape::integer, Scope::per_namespace, "packetization-layer PMTU discovery"},
    {"net.ipv4.tcp_notsent_lowat", Shape::bytes, Scope::per_namespace, "unsent bytes before poll says writable"},
    {"net.ipv4.tcp_autocorking", Shape::boolean, Scope::per_namespace,
     "coalesce small writes while packets are queued"},
    {"net.ipv4.tcp_adv_win_scale", Shape::integer, Scope::per_namespace, "share of the buffer given to the window"},
    {"net.ipv4.tcp_moderate_rcvbuf", Shape::boolean, Scope::per_namespace, "receive buffer autotuning"},
    {"net.ipv4.tcp_fastopen", Shape::integer, Scope::per_namespace, "TCP Fast Open flags"},
    {"net.ipv4.tcp_tw_reuse", Shape::integer, Scope::per_namespace, "reuse TIME-WAIT sockets for new connections"},
    {"net.ipv4.tcp_fin_timeout", Shape::integer, Scope::per_namespace, "FIN-WAIT-2 timeout (s)"},
    {"net.ipv4.tcp_limit_output_bytes", Shape::bytes, Scope::per_namespace, "TCP Small Queues limit per socket"},
    {"net.ipv4.tcp_min_tso_segs", Shape::integer, Scope::per_namespace, "minimal TSO burst"},
    {"net.ipv4.ip_forward", Shape::boolean, Scope::per_namespace, "route between interfaces"},
    {"net.ipv4.ip_local_port_range", Shape::pair, Scope::per_namespace, "ephemeral ports"},
    {"net.ipv4.tcp_syn_retries", Shape::integer, Scope::per_namespace, "SYN retransmissions"},
    {"net.ipv4.tcp_retries2", Shape::integer, Scope::per_namespace, "retransmissions before giving up"},
    {"net.ipv4.tcp_reordering", Shape::integer, Scope::per_namespace, "initial reordering degree"},
    {"net.ipv4.tcp_max_reordering", Shape::integer, Scope::per_namespace, "largest reordering degree"},
    {"net.ipv4.tcp_early_retrans", Shape::integer, Scope::per_namespace, "tail loss probe / RACK"},
    {"net.ipv4.tcp_recovery", Shape::integer, Scope::per_namespace, "RACK loss detection flags"},
    {"net.ipv4.tcp_pacing_ss_ratio", Shape::integer, Scope::per_namespace, "pacing rate in slow start (%)"},
    {"net.ipv4.tcp_pacing_ca_ratio", Shape::integer, Scope::per_namespace, "pacing rate in congestion avoidance (%)"},
};

const std::vector<std::string> kHostNames{"client", "router", "server", "host"};

// True when a and b differ by at most `n` single-character edits (same length or one apart).
bool distance_at_most(const std::string& a, const std::string& b, std::size_t n) {
    std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        cur[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j)
            cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
        std::swap(prev, cur);
    }
    return prev[b.size()] <= n;
}

}  // namespace

bool valid_key_syntax(std::string_view key) {
    // Canonical: no empty component, so one key names one /proc/sys file and the other way
    // round ("net.core..rmem_max" would reach net.core.rmem_max's file past every check
    // keyed on the name).
    if (!key.starts_with("net.") || key.size() < 5 || key.size() > 255 || key.back() == '.' ||
        key.find("..") != std::string_view::npos)
        return false;
    return std::all_of(key.begin(), key.end(), [](char c) {
        return std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '.' ||
               c == '_' || c == '-';
    });
}

namespace {

void flatten_into(const Node& table, const std::string& prefix, Node& out, Diagnostics& diag) {
    for (const auto& [key, value] : table.members) {
        std::string name = prefix.empty() ? key : prefix + "." + key;
        if (value.kind == Node::Kind::table) {
            flatten_into(value, name, out, diag);
            continue;
        }
        if (const Node* earlier = out.find(name)) {
            diag.error(value.key_at,
                       fmt::format("sysctl `{}` is set twice (first at line {})", name, earlier->key_at.line));
            continue;
        }
        out.members.emplace_back(name, value);
    }
}

Node flatten(const Node& table, Diagnostics& diag) {
    Node out;
    out.kind = Node::Kind::table;
    out.key_at = table.key_at;
    out.value_at = table.value_at;
    flatten_into(table, "", out, diag);
    return out;
}

std::optional<std::uint64_t> byte_value(const Node& n, const std::string& key, Diagnostics& d) {
    if (n.kind == Node::Kind::value && n.value->is_integer()) {
        auto v = config::to_integer(n, key, 0, std::numeric_limits<std::int64_t>::max(), d);
        if (v) return static_cast<std::uint64_t>(*v);
        return std::nullopt;
    }
    return config::to_size(n, key, d);
}

std::optional<std::string> triplet(const Node& n, const std::string& key, std::size_t count, bool sizes,
                                   Diagnostics& d) {
    std::vector<std::uint64_t> values;
    if (n.kind == Node::Kind::value && n.value->is_array()) {
        const auto& arr = *n.value->as_array();
        if (arr.size() != count) {
            d.error(n.value_at, fmt::format("`{}` takes {} values (min default max), not {}", key, count, arr.size()));
            return std::nullopt;
        }
        for (std::size_t i = 0; i < arr.size(); ++i) {
            Node el = config::element(n, i);
            auto v = sizes ? byte_value(el, key, d) : [&]() -> std::optional<std::uint64_t> {
                auto i64 = config::to_integer(el, key, 0, std::numeric_limits<std::int64_t>::max(), d);
                if (i64) return static_cast<std::uint64_t>(*i64);
                return std::nullopt;
            }();
            if (!v) return std::nullopt;
            values.push_back(*v);
        }
    } else if (auto s = n.kind == Node::Kind::value ? n.value->value_exact<std::string>() : std::nullopt) {
        std::string word;
        std::vector<std::string> words;
        for (char c : *s + " ") {
            if (std::isspace(static_cast<unsigned char>(c))) {
                if (!word.empty()) words.push_back(word);
                word.clear();
            } else {
                word += c;
            }
        }
        if (words.size() != count) {
            d.error(n.value_at, fmt::format("`{}` takes {} values, not {}: write [4096, 131072, \"16M\"]", key, count,
                                            words.size()));
            return std::nullopt;
        }
        for (const auto& w : words) {
            if (!sizes &&
                !std::all_of(w.begin(), w.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
                d.error(n.value_at, fmt::format("`{}` takes whole numbers (pages, ports), not `{}`", key, w));
                return std::nullopt;
            }
            auto p = units::parse_size(w);
            if (auto* e = std::get_if<units::UnitError>(&p)) {
                d.error(n.value_at, fmt::format("`{}`: {}", key, e->message));
                return std::nullopt;
            }
            values.push_back(std::get<std::uint64_t>(p));
        }
    } else {
        d.error(n.value_at, fmt::format("`{}` takes {} values as an array such as [4096, 131072, \"16M\"], not {}", key,
                                        count, config::describe(n)));
        return std::nullopt;
    }
    if (count == 3 && (values[0] > values[1] || values[1] > values[2])) {
        d.error(n.value_at, fmt::format("`{}` must be ordered min <= default <= max: {} {} {}", key, values[0],
                                        values[1], values[2]));
        return std::nullopt;
    }
    std::string out;
    for (auto v : values) out += (out.empty() ? "" : " ") + std::to_string(v);
    return out;
}

std::optional<std::string> scalar(const Node& n, const std::string& key, Diagnostics& d) {
    if (n.kind != Node::Kind::value) {
        d.error(n.value_at, fmt::format("sysctl `{}` must be a value, not {}", key, config::describe(n)));
        return std::nullopt;
    }
    if (auto i = n.value->value_exact<std::int64_t>()) return std::to_string(*i);
    if (auto b = n.value->value_exact<bool>()) return *b ? "1" : "0";
    if (auto s = n.value->value_exact<std::string>()) {
        if (s->empty() || s->find('\n') != std::string::npos) {
            d.error(n.value_at, fmt::format("sysctl `{}` needs a one-line, non-empty value", key));
            return std::nullopt;
        }
        return *s;
    }
    if (n.value->is_array()) {
        std::string out;
        for (std::size_t i = 0; i < n.value->as_array()->size(); ++i) {
            auto el = scalar(config::element(n, i), key, d);
            if (!el) return std::nullopt;
            out += (out.empty() ? "" : " ") + *el;
        }
        return out;
    }
    d.error(n.value_at,
            fmt::format("sysctl `{}` must be an integer, a string or an array, not {}", key, config::describe(n)));
    return std::nullopt;
}

std::optional<std::string> value_for(const std::string& key, const Node& n, Diagnostics& d) {
    const KeyInfo* info = lookup(key);
    if (!info) return scalar(n, key, d);
    switch (info->shape) {
        case Shape::bytes:
            if (auto v = byte_value(n, key, d)) return std::to_string(*v);
            return std::nullopt;
        case Shape::integer:
            if (auto v = config::to_integer(n, key, std::numeric_limits<std::int32_t>::min(),
                                            std::numeric_limits<std::int32_t>::max(), d))
                return std::to_string(*v);
            return std::nullopt;
        case Shape::boolean:
            if (n.kind == Node::Kind::value) {
                if (auto b = n.value->value_exact<bool>()) return *b ? "1" : "0";
                if (auto i = n.value->value_exact<std::int64_t>(); i && (*i == 0 || *i == 1)) return std::to_string(*i);
            }
            d.error(n.value_at,
                    fmt::format("`{}` must be true or false (or 1 or 0), not {}", key, config::describe(n)));
            return std::nullopt;
        case Shape::triplet_bytes: return triplet(n, key, 3, true, d);
        case Shape::triplet_pages: return triplet(n, key, 3, false, d);
        case Shape::pair: return triplet(n, key, 2, false, d);
        case Shape::string: {
            auto s = n.kind == Node::Kind::value ? n.value->value_exact<std::string>() : std::nullopt;
            if (s && !s->empty() && std::all_of(s->begin(), s->end(), [](char c) {
                    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
                }))
                return *s;
            d.error(n.value_at, fmt::format("`{}` must be a name such as \"bbr\", not {}", key,
                                            s ? fmt::format("\"{}\"", *s) : config::describe(n)));
            return std::nullopt;
        }
    }
    return std::nullopt;
}

}  // namespace

const KeyInfo* lookup(std::string_view key) {
    // Every key of every trial is looked up: a hash, not a scan of the table (with a strlen
    // per entry).
    static const std::unordered_map<std::string_view, const KeyInfo*> index = [] {
        std::unordered_map<std::string_view, const KeyInfo*> all;
        for (const auto& k : kKeys) all.emplace(k.key, &k);
        return all;
    }();
    auto it = index.find(key);
    return it == index.end() ? nullptr : it->second;
}

bool SysctlSpec::empty() const {
    if (!global.empty()) return false;
    for (const auto& [h, s] : per_host)
        if (!s.empty()) return false;
    return true;
}

void normalize_sysctl_table(Node& sysctl, Diagnostics& diag) {
    Node out;
    out.kind = Node::Kind::table;
    out.key_at = sysctl.key_at;
    out.value_at = sysctl.value_at;
    Node plain;
    plain.kind = Node::Kind::table;
    for (const auto& [key, value] : sysctl.members) {
        bool host = std::find(kHostNames.begin(), kHostNames.end(), key) != kHostNames.end();
        if ((host && value.kind == Node::Kind::table) || key == "profile")
            out.members.emplace_back(key, key == "profile" ? value : flatten(value, diag));
        else
            plain.members.emplace_back(key, value);
    }
    Node flat = flatten(plain, diag);
    for (auto& m : flat.members) out.members.push_back(std::move(m));
    sysctl = std::move(out);
}

namespace {
struct Pending {
    Setting setting;
    std::string host;  // "" = every endpoint
};

/// The known key nearest `key`, worked out once per key: every trial of a sweep reads the same
/// [sysctl] table again, and 3,000 unknown keys x 300 points took 8 minutes to validate.
std::string nearest_known(const std::string& key) {
    static std::mutex mutex;
    static std::unordered_map<std::string, std::string> seen;
    std::lock_guard lock(mutex);
    if (auto it = seen.find(key); it != seen.end()) return it->second;
    static const std::vector<std::string> names = [] {
        std::vector<std::string> all;
        for (const auto& k : kKeys) all.emplace_back(k.key);
        return all;
    }();
    if (seen.size() > 100'000) seen.clear();  // bounded, whatever a process loads
    return seen[key] = did_you_mean(key, names);
}

void read_table(const Node& table, const std::string& host, const std::vector<std::string>& hosts,
                std::vector<Pending>& out, Diagnostics& diag) {
    for (const auto& [key, value] : table.members) {
        if (key == "profile") continue;
        if (std::find(kHostNames.begin(), kHostNames.end(), key) != kHostNames.end() && value.is_table()) {
            if (!host.empty()) {
                diag.error(value.key_at, fmt::format("[sysctl.{}] cannot contain a host table `{}`", host, key));
            } else if (std::find(hosts.begin(), hosts.end(), key) == hosts.end()) {
                std::string list;
                for (const auto& h : hosts) list += (list.empty() ? "" : ", ") + fmt::format("[sysctl.{}]", h);
                diag.error(value.key_at,
                           fmt::format("[sysctl.{}] does not exist in this lab: its hosts take {}", key, list));
            } else {
                read_table(value, key, hosts, out, diag);
            }
            continue;
        }
        if (!valid_key_syntax(key)) {
            auto guess = nearest_known(key);
            if (key.find("..") != std::string::npos)
                diag.error(value.key_at,
                           fmt::format("`{}` has an empty component: write each name between dots once, as `sysctl "
                                       "-a` does{}",
                                       key, guess.empty() ? "" : fmt::format("; did you mean `{}`?", guess)));
            else
                diag.error(value.key_at,
                           fmt::format("`{}` is not a net.* sysctl name: wanlab changes only network settings, written "
                                       "as in `sysctl -a` (\"net.core.rmem_max\"){}",
                                       key, guess.empty() ? "" : fmt::format("; did you mean `{}`?", guess)));
            continue;
        }
        if (!lookup(key)) {
            // Unknown to wanlab is fine (the kernel has hundreds; the lab checks it exists
            // before applying), but one edit or two away from a key we know is a typo.
            auto guess = nearest_known(key);
            if (!guess.empty() && distance_at_most(key, guess, 2)) {
                diag.error(value.key_at, fmt::format("unknown sysctl `{}`; did you mean `{}`?", key, guess));
                continue;
            }
        }
        auto v = value_for(key, value, diag);
        if (!v) continue;
        const KeyInfo* info = lookup(key);
        out.push_back({Setting{key, *v, info ? info->scope : Scope::unknown, value.value_at}, host});
    }
}
}  // namespace

SysctlSpec parse_sysctls(const Node& sysctl, const std::vector<std::string>& hosts, Diagnostics& diag) {
    std::vector<Pending> pending;
    read_table(sysctl, "", hosts, pending, diag);
    // Plain [sysctl] keys first, so a host table's value replaces them wherever written.
    std::stable_partition(pending.begin(), pending.end(), [](const Pending& p) { return p.host.empty(); });
    std::vector<std::string> endpoints;
    for (const auto& h : hosts)
        if (h != "router") endpoints.push_back(h);
    SysctlSpec spec;
    for (const auto& h : hosts) spec.per_host[h];
    // Where each key already is, per host ("" = the global list): linear in the keys, where a
    // search of each list made 3,000 keys cost 9 million comparisons per trial.
    std::map<std::string, std::unordered_map<std::string, std::size_t>> at;
    for (const auto& h : hosts) at[h].reserve(pending.size());
    for (auto& p : pending) {
        if (p.setting.scope == Scope::global) {
            auto [pos, fresh] = at[""].emplace(p.setting.key, spec.global.size());
            if (fresh) {
                spec.global.push_back(std::move(p.setting));
                continue;
            }
            auto it = spec.global.begin() + static_cast<std::ptrdiff_t>(pos->second);
            if (it->value != p.setting.value) {
                diag.error(p.setting.at,
                           fmt::format("`{}` is global (one value for the whole machine, even in a namespace lab): "
                                       "it cannot be {} here and {} at line {}",
                                       p.setting.key, p.setting.value, it->value, it->at.line));
            }
            continue;
        }
        const auto& targets = p.host.empty() ? endpoints : std::vector<std::string>{p.host};
        for (std::size_t i = 0; i < targets.size(); ++i) {
            auto& list = spec.per_host[targets[i]];
            auto [pos, fresh] = at[targets[i]].emplace(p.setting.key, list.size());
            // The last host takes the setting itself; the others a copy.
            Setting s = i + 1 == targets.size() ? std::move(p.setting) : p.setting;
            if (fresh)
                list.push_back(std::move(s));
            else
                list[pos->second] = std::move(s);  // a host table overrides the plain [sysctl] value
        }
    }
    return spec;
}

}  // namespace wanlab::sysctl
