#include "diagnosis/buffers.h"

#include <algorithm>
#include <sstream>

#include "core/units.h"
#include "probes/probe.h"

namespace wanlab::diagnosis {
namespace {

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
Sizing sizing_of(const std::vector<const results::Measurement*>& bulk, bool receive) {
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

}  // namespace

std::optional<BufferAdvice> buffer_advice(const results::RunData& data, const results::Trial& t,
                                          const std::vector<const results::Measurement*>& bulk) {
    if (!(t.link_rate > 0 && t.link_rtt > 0) || bulk.empty()) return std::nullopt;  // buffers matter to bulk transfers
    std::vector<std::string> directions;
    for (const auto* m : bulk)
        for (const auto& c : m->connections)
            if (c.is_object() && c.contains("direction") && c["direction"].is_string())
                directions.push_back(c["direction"].get<std::string>());
    if (directions.empty()) directions = {"upload", "download"};  // unknown: either could apply

    BufferAdvice a;
    a.bdp_bytes = t.link_rate * t.link_rtt / 8;
    // With the default tcp_adv_win_scale the kernel keeps about half of a socket buffer for
    // its own overhead, so a window of one BDP needs a buffer of two.
    a.target_bytes = next_power_of_two(2 * a.bdp_bytes);
    for (const auto& b : kBuffers) {
        // Advice only where it can change the result: an autotuned buffer is capped by
        // tcp_rmem/tcp_wmem, an explicit SO_RCVBUF/SO_SNDBUF (iperf3 -w) by rmem_max/wmem_max.
        auto sizing = sizing_of(bulk, b.receive);
        if (b.triple ? !sizing.autotuned : !sizing.explicit_ask) continue;
        for (const auto& s : settings_of(data, t, b)) {
            if (!applies(s.host, b.receive, directions)) continue;
            double max = static_cast<double>(s.fields.back());
            if (max >= 2 * a.bdp_bytes) continue;
            a.short_buffers.push_back({b.key, b.triple, s.host, s.fields, s.before, max < a.bdp_bytes});
        }
    }
    if (a.short_buffers.empty()) return std::nullopt;
    return a;
}

}  // namespace wanlab::diagnosis
