// explain(): sentences the measurements support, for the reader who asks "why this number?".
//
// Two kinds, and nothing without the data behind it:
//  - the diagnosis of each probe in each trial, as diagnosis/ concludes it from the evidence
//    it gathers beside its rules (diagnosis/evidence.h), placed and flagged here;
//  - bandwidth-delay advice, from a trial's configured rate and RTT against the buffer
//    maxima the trial set (or, for keys it did not set, those the host had before the run).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <sstream>
#include <utility>

#include <fmt/format.h>

#include "core/units.h"
#include "diagnosis/evidence.h"
#include "diagnosis/rules.h"
#include "probes/probe.h"
#include "report/detail.h"

namespace wanlab::report {
namespace {

using probes::Unit;
using Measurements = diagnosis::Repeats;

std::string where(const results::Trial& t) {
    auto point = detail::point_label(t);
    return point.empty() ? t.variant : t.variant + " @ " + point;
}

std::string flag(const results::Trial& t) {
    return detail::emulation_failed(&t) ? " [! emulation did not hold in this trial]" : "";
}

// --- bandwidth-delay advice ---------------------------------------------------------------

struct Buffer {
    const char* key;
    bool receive;  // sized on the receiving host (rmem) or the sending one (wmem)
    bool triple;   // "min default max"
};
const Buffer kBuffers[] = {
    {"net.core.rmem_max", true, false},
    {"net.ipv4.tcp_rmem", true, true},
    {"net.core.wmem_max", false, false},
    {"net.ipv4.tcp_wmem", false, true},
};

/// One value of a buffer key as it applied to the trial.
struct Setting {
    std::string host;  // "" for a global key
    std::vector<std::uint64_t> fields;
    bool before = false;  // not set by the trial: the host's value before the run
};

// "4096\t131072\t6291456", "212992" (as written to /proc/sys) or "64M" -> bytes.
std::optional<std::vector<std::uint64_t>> parse_fields(const std::string& value) {
    std::istringstream in(value);
    std::vector<std::uint64_t> fields;
    for (std::string word; in >> word;) {
        auto parsed = units::parse_size(word);
        if (!units::ok(parsed)) return std::nullopt;
        fields.push_back(std::get<std::uint64_t>(parsed));
    }
    if (fields.empty()) return std::nullopt;
    return fields;
}

std::vector<Setting> settings_of(const results::RunData& data, const results::Trial& t, const Buffer& b) {
    std::vector<Setting> out;
    for (const auto& kv : t.sysctls) {
        auto colon = kv.first.find(':');
        std::string host = colon == std::string::npos ? "" : kv.first.substr(0, colon);
        std::string key = colon == std::string::npos ? kv.first : kv.first.substr(colon + 1);
        if (key != b.key) continue;
        if (auto fields = parse_fields(kv.second); fields && (!b.triple || fields->size() == 3))
            out.push_back(Setting{host, *fields, false});
    }
    if (out.empty())
        if (auto it = data.run.env.sysctls_before.find(b.key); it != data.run.env.sysctls_before.end())
            if (auto fields = parse_fields(it->second); fields && (!b.triple || fields->size() == 3))
                out.push_back(Setting{"", *fields, true});
    return out;
}

// Does this host's value apply to the transfers measured? Upload: the server receives,
// the client sends; download the reverse. Global keys and host mode ("host") always do.
bool applies(const std::string& host, bool receive, const std::vector<std::string>& directions) {
    if (host.empty() || host == "host") return true;
    for (const auto& d : directions) {
        bool upload = d == "upload";
        if (receive && host == (upload ? "server" : "client")) return true;
        if (!receive && host == (upload ? "client" : "server")) return true;
    }
    return false;
}

std::uint64_t next_power_of_two(double x) {
    std::uint64_t p = 1;
    while (static_cast<double>(p) < x) p <<= 1;
    return p;
}

// Whether the bulk measurements' receive (or send) buffers were autotuned, so tcp_rmem
// (tcp_wmem) capped them, or explicitly asked, so rmem_max (wmem_max) did. Both, when the
// measurements differ; autotuned, when none says (an older run).
struct Sizing {
    bool autotuned = false, explicit_ask = false;
};
Sizing sizing_of(const Measurements& bulk, bool receive) {
    Sizing s;
    const char* marker = receive ? probes::kRcvbufAutotuned : probes::kSndbufAutotuned;
    for (const auto* m : bulk) {
        bool autotuned = std::any_of(m->notes.begin(), m->notes.end(),
                                     [marker](const std::string& n) { return n.starts_with(marker); });
        bool asked = std::any_of(m->notes.begin(), m->notes.end(), [receive](const std::string& n) {
            return n.starts_with(receive ? "rcvbuf: asked" : "sndbuf: asked") || n.starts_with("iperf3 -w");
        });
        s.autotuned = s.autotuned || autotuned || !asked;
        s.explicit_ask = s.explicit_ask || asked;
    }
    return s;
}

void bdp_advice(std::vector<std::string>& out, const results::RunData& data, const results::Trial& t,
                const Measurements& bulk) {
    if (!(t.link_rate > 0 && t.link_rtt > 0) || bulk.empty()) return;  // buffers matter to bulk transfers
    std::vector<std::string> directions;
    for (const auto* m : bulk)
        for (const auto& c : m->connections)
            if (c.is_object() && c.contains("direction") && c["direction"].is_string())
                directions.push_back(c["direction"].get<std::string>());
    if (directions.empty()) directions = {"upload", "download"};  // unknown: either could apply

    double bdp = t.link_rate * t.link_rtt / 8;
    // With the default tcp_adv_win_scale the kernel keeps about half of a socket buffer for
    // its own overhead, so a window of one BDP needs a buffer of two.
    auto target = next_power_of_two(2 * bdp);
    std::vector<std::string> below_bdp, below_twice, set;
    bool core = false, autotuned = false;
    for (const auto& b : kBuffers) {
        // Advice only where it can change the result: an autotuned buffer is capped by
        // tcp_rmem/tcp_wmem, an explicit SO_RCVBUF/SO_SNDBUF (iperf3 -w) by rmem_max/wmem_max.
        auto sizing = sizing_of(bulk, b.receive);
        if (b.triple ? !sizing.autotuned : !sizing.explicit_ask) continue;
        for (const auto& s : settings_of(data, t, b)) {
            if (!applies(s.host, b.receive, directions)) continue;
            double max = static_cast<double>(s.fields.back());
            if (max >= 2 * bdp) continue;
            auto on = s.host.empty() ? std::string() : " on " + s.host;
            auto name = fmt::format("{}{}{} = {} ({})", b.key, b.triple ? " max" : "", on, s.fields.back(),
                                    detail::human_bytes(max)) +
                        (s.before ? " before the run" : "");
            (max < bdp ? below_bdp : below_twice).push_back(name);
            if (b.triple)
                set.push_back(fmt::format("{}=\"{} {} {}\"{}", b.key, s.fields[0], s.fields[1], target, on));
            else
                set.push_back(fmt::format("{}={}{}", b.key, target, on));
            core = core || !b.triple;
            autotuned = autotuned || b.triple;
        }
    }
    if (set.empty()) return;
    auto s = fmt::format("{}: bandwidth-delay product {} x {} = {} ({:.0f} bytes)", where(t),
                         probes::human(Unit::bits_per_second, t.link_rate), probes::human(Unit::seconds, t.link_rtt),
                         detail::human_bytes(bdp), bdp);
    auto list = [](const std::vector<std::string>& v) {
        std::string joined;
        for (const auto& x : v) joined += (joined.empty() ? "" : ", ") + x;
        return joined;
    };
    if (!below_bdp.empty()) s += "; below the BDP: " + list(below_bdp);
    if (!below_twice.empty())
        s += "; below 2 x BDP (the kernel keeps about half of a buffer for overhead): " + list(below_twice);
    s += fmt::format("; set {} ({}, the power of two at or above 2 x BDP)", list(set),
                     detail::human_bytes(static_cast<double>(target)));
    if (core)
        s += "; rmem_max/wmem_max cap what an explicit SO_RCVBUF/SO_SNDBUF (iperf3 -w) gets, and such a buffer is "
             "not autotuned";
    if (autotuned)
        s += "; tcp_rmem/tcp_wmem max cap the autotuned buffers of a probe that asks for none (rmem_max/wmem_max "
             "would not change it)";
    out.push_back(s + flag(t));
}

}  // namespace

std::vector<std::string> explain(const results::RunData& data) {
    std::vector<std::string> out;
    for (const auto& t : data.trials) {
        Measurements bulk;
        for (const auto& [name, ms] : diagnosis::repeats_by_probe(data, t))
            if (probes::traits_of(ms.front()->kind).bulk_tcp) bulk.insert(bulk.end(), ms.begin(), ms.end());
        if (auto v = diagnosis::emulation_not_held(t.check.held, t.check.note))
            out.push_back(fmt::format("{}: {}", where(t), v->text));
        // Every probe's diagnosis (diagnosis/evidence.h), on the repeats that measured.
        bool rate_bound = false;
        for (const auto& d : diagnosis::diagnose_trial(data, t))
            for (const auto& v : d.verdicts) {
                rate_bound = rate_bound || v.rule == "rate-bound";
                out.push_back(fmt::format("{}, {}: {}{}", d.probe, where(t), v.text, flag(t)));
            }
        // A link whose rate is the bound gains nothing from bigger buffers.
        if (!rate_bound) bdp_advice(out, data, t, bulk);
    }
    return out;
}

}  // namespace wanlab::report
