#include "probes/probe_spec.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "core/error.h"
#include "core/placeholders.h"
#include "core/units.h"
#include "probes/http.h"

namespace wanlab::probes {
namespace {

using config::Node;
using config::Reader;
constexpr std::int64_t kBig = 1'000'000'000;
// Duration options' lower bound, in nanoseconds: a 0 interval would make ping flood (as
// root, `ping -i 0`), and a timer wheel of a zero period spins.
constexpr std::int64_t kOneMs = 1'000'000;

// Options every kind shares.
std::vector<OptionSpec> common(std::vector<OptionSpec> own) {
    std::vector<OptionSpec> all{
        {"duration", OptionType::duration, "@run.duration", "how long each repeat measures", kOneMs},
    };
    all.insert(all.end(), own.begin(), own.end());
    return all;
}

const std::vector<ProbeKind> kKinds{
    {"throughput",
     "TCP bulk transfer: goodput, retransmits, and why it is what it is (TCP_INFO)",
     common({
         {"streams", OptionType::integer, "1", "parallel TCP connections", 1, 128},
         {"direction",
          OptionType::choice,
          "\"upload\"",
          "upload (client sends), download, or both",
          0,
          0,
          {"upload", "download", "both"}},
         {"interval", OptionType::duration, "\"1s\"", "sampling interval", kOneMs},
         {"congestion_control", OptionType::string, "\"\"", "per-socket TCP_CONGESTION; empty = the sysctl"},
         {"sndbuf", OptionType::size, "0", "SO_SNDBUF asked for; 0 = autotuning"},
         {"rcvbuf", OptionType::size, "0", "SO_RCVBUF asked for; 0 = autotuning"},
         {"tool", OptionType::choice, "\"builtin\"", "builtin or iperf3", 0, 0, {"builtin", "iperf3"}},
         {"server_port", OptionType::integer, "0",
          "measure against a [[service]] (iperf3 -s) listening on this port of the server host; 0 = the probe "
          "starts its own server",
          0, 65535},
     }),
     {
         {"throughput", Unit::bits_per_second, true, "goodput summed over streams"},
         {"retransmits", Unit::count, false, "segments retransmitted"},
         {"rtt", Unit::seconds, false, "smoothed RTT from TCP_INFO"},
         {"cwnd", Unit::count, true, "congestion window at the end, segments"},
         {"rwnd_limited", Unit::fraction, false, "share of time limited by the receive window"},
         {"sndbuf_limited", Unit::fraction, false, "share of time limited by the send buffer"},
         {"rcvbuf_granted", Unit::bytes, true, "receive buffer the kernel granted"},
         {"throughput_upload", Unit::bits_per_second, true, "goodput client -> server"},
         {"throughput_download", Unit::bits_per_second, true, "goodput server -> client"},
         {"delivery_rate", Unit::bits_per_second, true, "TCP_INFO delivery rate at the end, summed"},
         {"sndbuf_granted", Unit::bytes, true, "send buffer the kernel granted"},
     }},
    {"rtt",
     "round-trip time: TCP handshake, ICMP echo or UDP echo",
     common({
         {"method", OptionType::choice, "\"tcp\"", "tcp (connect timing), icmp or udp", 0, 0, {"tcp", "icmp", "udp"}},
         {"count", OptionType::integer, "100", "probes per repeat", 1, 10'000'000},
         {"interval", OptionType::duration, "\"10ms\"", "time between probes", kOneMs},
         {"size", OptionType::size, "64", "payload bytes (icmp, udp)"},
         {"tool", OptionType::choice, "\"builtin\"", "builtin, ping or hping3", 0, 0, {"builtin", "ping", "hping3"}},
         {"server_port", OptionType::integer, "0",
          "time connects to a [[service]] listening on this port of the server host (method tcp); 0 = the probe's "
          "own listener",
          0, 65535},
     }),
     {
         {"rtt_min", Unit::seconds, false, "smallest RTT"},
         {"rtt_avg", Unit::seconds, false, "mean RTT"},
         {"rtt_p50", Unit::seconds, false, "median RTT"},
         {"rtt_p99", Unit::seconds, false, "99th percentile RTT"},
         {"rtt_max", Unit::seconds, false, "largest RTT"},
         {"rtt_mdev", Unit::seconds, false, "mean deviation, as ping prints it"},
         {"loss", Unit::fraction, false, "probes without an answer"},
         {"sent", Unit::count, true, "probes sent"},
     }},
    {"rr",
     "TCP request/response (netperf TCP_RR): latency per transaction",
     common({
         {"request_size", OptionType::size, "100", "bytes per request"},
         {"response_size", OptionType::size, "200", "bytes per response"},
         {"connections", OptionType::integer, "1", "concurrent connections", 1, 100'000},
         {"client_nodelay", OptionType::boolean, "true", "TCP_NODELAY on the client"},
         {"client_quickack", OptionType::boolean, "false", "TCP_QUICKACK on the client after each read"},
         {"server_nodelay", OptionType::boolean, "true", "TCP_NODELAY on the server"},
         {"server_quickack", OptionType::boolean, "false", "TCP_QUICKACK on the server after each read"},
         {"server_split_write", OptionType::boolean, "false",
          "write each response in two parts (header, body), as servers do"},
     }),
     {
         {"transactions_per_second", Unit::per_second, true, "completed request/response pairs per second"},
         {"latency_mean", Unit::seconds, false, "mean transaction time"},
         {"latency_p50", Unit::seconds, false, "median transaction time"},
         {"latency_p90", Unit::seconds, false, "90th percentile"},
         {"latency_p99", Unit::seconds, false, "99th percentile"},
         {"latency_max", Unit::seconds, false, "slowest transaction"},
         {"transactions", Unit::count, true, "completed request/response pairs"},
         {"errors", Unit::count, false, "connections that failed or timed out mid-transaction"},
     }},
    {"http",
     "HTTP/1.1 keep-alive load (wrk-like): requests/s and latency percentiles",
     common({
         {"connections", OptionType::integer, "10", "open keep-alive connections, one request in flight on each", 1,
          100'000},
         {"threads", OptionType::integer, "1", "load generator threads (epoll loops)", 1, 256},
         {"rate", OptionType::integer, "0",
          "requests per second in total, latency from each intended send time; 0 = closed loop", 0, kBig},
         {"timeout", OptionType::duration, "\"2s\"", "a request unanswered this long counts as an error", kOneMs},
         {"response_size", OptionType::size, "1024", "body bytes of the built-in server's answer"},
         {"server_threads", OptionType::integer, "1", "built-in server threads (epoll loops)", 1, 256},
         {"server_nodelay", OptionType::boolean, "true", "TCP_NODELAY on the built-in server"},
         {"server_quickack", OptionType::boolean, "false", "TCP_QUICKACK on the built-in server after each read"},
         {"server_split_write", OptionType::boolean, "false", "the built-in server writes headers and body separately"},
         {"client_nodelay", OptionType::boolean, "true", "TCP_NODELAY on the load generator"},
         {"client_quickack", OptionType::boolean, "false", "TCP_QUICKACK on the load generator after each read"},
         {"url", OptionType::string, "\"\"", "http://ADDRESS[:PORT][/PATH] to load instead of the built-in server"},
         {"tool", OptionType::choice, "\"builtin\"", "builtin or wrk", 0, 0, {"builtin", "wrk"}},
     }),
     {
         {"requests_per_second", Unit::per_second, true, "completed requests per second"},
         {"latency_mean", Unit::seconds, false, "mean request latency"},
         {"latency_p50", Unit::seconds, false, "median"},
         {"latency_p90", Unit::seconds, false, "90th percentile"},
         {"latency_p99", Unit::seconds, false, "99th percentile"},
         {"latency_p999", Unit::seconds, false, "99.9th percentile"},
         {"latency_max", Unit::seconds, false, "slowest request"},
         {"errors", Unit::count, false, "timeouts, non-2xx answers, refused, reset or malformed"},
         {"timeouts", Unit::count, false, "requests unanswered within `timeout`"},
         {"non_2xx", Unit::count, false, "answers with a status outside 200-299"},
         {"requests", Unit::count, true, "completed requests (any status)"},
         {"throughput", Unit::bits_per_second, true, "response bytes (headers and body) received"},
     }},
};

bool valid_name(const std::string& s) {
    return !s.empty() && s.size() <= 64 && std::all_of(s.begin(), s.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
    });
}

std::optional<OptionValue> read_option(Reader& r, const OptionSpec& o) {
    switch (o.type) {
        case OptionType::duration:
            // min and max, when given, are in nanoseconds.
            if (auto v = o.max ? r.duration(o.name, std::chrono::nanoseconds{o.min}, std::chrono::nanoseconds{o.max})
                               : r.duration(o.name, std::chrono::nanoseconds{o.min}))
                return OptionValue{static_cast<std::int64_t>(v->count())};
            break;
        case OptionType::integer:
            if (auto v = r.integer(o.name, o.min, o.max)) return OptionValue{*v};
            break;
        case OptionType::size:
            if (auto v = r.size(o.name)) return OptionValue{static_cast<std::int64_t>(*v)};
            break;
        case OptionType::rate:
            if (auto v = r.rate(o.name)) return OptionValue{static_cast<std::int64_t>(*v)};
            break;
        case OptionType::percent:
            if (auto v = r.percent(o.name)) return OptionValue{*v};
            break;
        case OptionType::boolean:
            if (auto v = r.boolean(o.name)) return OptionValue{*v};
            break;
        case OptionType::choice:
            if (auto v = r.choice(o.name, o.choices)) return OptionValue{*v};
            break;
        case OptionType::string:
            if (auto v = r.string(o.name)) return OptionValue{*v};
            break;
    }
    return std::nullopt;
}

OptionValue default_of(const OptionSpec& o, std::chrono::nanoseconds run_duration) {
    std::string_view d = o.default_value;
    if (d == "@run.duration") return static_cast<std::int64_t>(run_duration.count());
    if (d.starts_with('"')) {
        std::string s(d.substr(1, d.size() - 2));
        if (o.type == OptionType::duration)
            return static_cast<std::int64_t>(std::get<std::chrono::nanoseconds>(units::parse_duration(s)).count());
        return s;
    }
    if (o.type == OptionType::boolean) return d == "true";
    return static_cast<std::int64_t>(std::stoll(std::string(d)));
}

std::int64_t int_of(const ProbeSpec& spec, const char* option) {
    auto v = std::get_if<std::int64_t>(&spec.options.at(option));
    return v ? *v : 0;
}

// The http kind's checks across and within options.
void check_http(const ProbeSpec& spec, const Reader& r, Diagnostics& diag) {
    if (auto url = std::get_if<std::string>(&spec.options.at("url")); url && !url->empty()) {
        std::size_t at = 0;
        if (auto why = text::unknown_placeholder(*url, kUrlPlaceholders, at); !why.empty()) {
            diag.error(r.value_at("url"), fmt::format("url \"{}\": {}", *url, why));
        } else {
            try {
                // Any address stands in for the lab's: only the url's form is checked here.
                http::parse_url(text::expand(*url, {{"server", "192.0.2.1"}, {"client", "192.0.2.1"}}, "url"));
            } catch (const InputError& e) {
                diag.error(r.value_at("url"), e.what());
            }
        }
    }
    if (int_of(spec, "threads") > int_of(spec, "connections"))
        diag.error(r.value_at("threads"),
                   fmt::format("`threads` ({}) is more than `connections` ({}): each thread needs a connection",
                               int_of(spec, "threads"), int_of(spec, "connections")));
    if (int_of(spec, "timeout") <= 0) diag.error(r.value_at("timeout"), "`timeout` must be above zero");
    if (int_of(spec, "response_size") > 64 * 1024 * 1024)
        diag.error(r.value_at("response_size"), "`response_size` must be at most 64MiB");
}

}  // namespace

const std::vector<ProbeKind>& probe_kinds() { return kKinds; }

const ProbeKind* find_kind(std::string_view name) {
    for (const auto& k : kKinds)
        if (name == k.name) return &k;
    return nullptr;
}

const MetricSpec* find_metric(const ProbeKind& kind, std::string_view metric) {
    for (const auto& m : kind.metrics)
        if (metric == m.name) return &m;
    return nullptr;
}

const char* unit_name(Unit u) {
    switch (u) {
        case Unit::bits_per_second: return "bit/s";
        case Unit::seconds: return "s";
        case Unit::fraction: return "fraction";
        case Unit::count: return "count";
        case Unit::per_second: return "1/s";
        case Unit::bytes: return "bytes";
    }
    return "";
}

ProbeSpec parse_probe(const Node& table, std::size_t index, std::chrono::nanoseconds default_duration,
                      Diagnostics& diag) {
    ProbeSpec spec;
    spec.at = table.value_at;
    Reader head(table, fmt::format("[[probe]] #{}", index + 1), diag);
    std::vector<std::string> kinds;
    for (const auto& k : kKinds) kinds.emplace_back(k.name);
    auto kind_name = head.choice("kind", kinds);
    if (!head.has("kind"))
        diag.error(table.value_at,
                   fmt::format("[[probe]] #{} needs `kind`: one of throughput, rtt, rr, http", index + 1));
    auto name = head.string("name");
    if (name && !valid_name(*name))
        diag.error(head.value_at("name"),
                   fmt::format("probe name \"{}\" must be 1-64 letters, digits, `-` or `_`", *name));
    const ProbeKind* kind = kind_name ? find_kind(*kind_name) : nullptr;
    if (!kind) return spec;  // options cannot be checked without a kind
    spec.kind = kind->name;
    spec.name = name && valid_name(*name) ? *name : kind->name;
    Reader r(table, fmt::format("[[probe]] \"{}\" (kind {})", spec.name, spec.kind), diag);
    r.raw("kind");
    r.raw("name");
    for (const auto& o : kind->options) {
        auto v = read_option(r, o);
        spec.options[o.name] = v ? *v : default_of(o, default_duration);
    }
    if (auto d = std::get_if<std::int64_t>(&spec.options["duration"]); d && *d <= 0)
        diag.error(r.value_at("duration"), "`duration` must be above zero");
    if (spec.kind == "http") check_http(spec, r, diag);
    r.finish();
    return spec;
}

std::string format_option(const ProbeKind& kind, const std::string& option, const OptionValue& v) {
    const OptionSpec* spec = nullptr;
    for (const auto& o : kind.options)
        if (option == o.name) spec = &o;
    if (auto b = std::get_if<bool>(&v)) return *b ? "true" : "false";
    if (auto s = std::get_if<std::string>(&v)) return *s;
    if (auto f = std::get_if<double>(&v)) return units::format_percent(*f);
    auto i = std::get<std::int64_t>(v);
    if (!spec) return std::to_string(i);
    switch (spec->type) {
        case OptionType::duration: return units::format_duration(std::chrono::nanoseconds{i});
        case OptionType::size: return units::format_size(static_cast<std::uint64_t>(i));
        case OptionType::rate: return units::format_rate(static_cast<std::uint64_t>(i));
        default: return std::to_string(i);
    }
}

}  // namespace wanlab::probes
