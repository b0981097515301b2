#include "probes/probe_spec.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "core/error.h"
#include "core/placeholders.h"
#include "core/text.h"
#include "core/units.h"
#include "probes/http.h"
#include "probes/output_match.h"

namespace wanlab::probes {
namespace {

using config::Node;
using config::Reader;
constexpr std::int64_t kBig = 1'000'000'000;
// Duration options' lower bound, in nanoseconds: a 0 interval would make ping flood (as
// root, `ping -i 0`), and a timer wheel of a zero period spins.
constexpr std::int64_t kOneMs = 1'000'000;
// The udp probe's pace at most: 100 Gbit/s, far above what one socket sends.
constexpr std::uint64_t kMaxUdpRate = 100'000'000'000;

// Options every kind shares.
std::vector<OptionSpec> common(std::vector<OptionSpec> own) {
    std::vector<OptionSpec> all{
        {"duration", OptionType::duration, "@run.duration", "how long each repeat measures", kOneMs},
        {"capture", OptionType::boolean, "false",
         "write each lab host's packets during this probe to a pcap file per trial (wanlab run)"},
        {"capture_packets", OptionType::integer, "0",
         "capture at most this many packets per file (implies capture); 0 = no packet bound", 0, kBig},
        {"capture_bytes", OptionType::size, "0", "a capture file's size at most (implies capture); 0 = 64MiB"},
        {"capture_snaplen", OptionType::integer, "128", "bytes kept of each captured packet (128: the headers)", 64,
         262144},
        {"group", OptionType::string, "\"\"",
         "probes with the same group run at the same time, for one duration (wanlab run); \"\" = alone"},
        {"family",
         OptionType::choice,
         "\"auto\"",
         "the IP version the probe measures over: ipv4, ipv6, or auto (the lab's: IPv4 unless [lab] ip = \"ipv6\")",
         0,
         0,
         {"auto", "ipv4", "ipv6"}},
    };
    all.insert(all.end(), own.begin(), own.end());
    return all;
}

// The distributions the latency charts draw (ProbeTraits::samples).
constexpr SampleTraits kRttSamples{"rtt", "round-trip time", "round-trip times"};
constexpr SampleTraits kLatencySamples{"latency", "latency", "latencies"};
constexpr SampleTraits kCompletionSamples{"completion", "completion time", "completion times"};

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
         {"fairness", Unit::fraction, true, "Jain's index over the streams' goodput (2 streams or more)"},
     },
     {
         .main_metric = "throughput",
         .headline = {"throughput", "retransmits", "rwnd_limited"},
         .charted_series = {"throughput", "stream1.cwnd", "stream1.srtt"},
         .group_series = {"throughput", "throughput_upload", "throughput_download"},
         .has_server_half = true,
         .remote = RemoteTarget::external_tool,
         .warms_up = true,
         .bulk_tcp = true,
     }},
    {"udp",
     "a paced UDP stream: goodput, loss, jitter (RFC 3550), reordering and one-way delay at the receiver",
     common({
         {"rate", OptionType::rate, "\"1mbit\"", "the sender's pace (payload bits per second)"},
         {"size", OptionType::size, "1460", "bytes per datagram (UDP payload, 24 to 65507)"},
         {"direction",
          OptionType::choice,
          "\"upload\"",
          "upload (client sends) or download",
          0,
          0,
          {"upload", "download"}},
         {"interval", OptionType::duration, "\"1s\"", "sampling interval of the series", kOneMs},
         {"tool", OptionType::choice, "\"builtin\"", "builtin or iperf3 (-u)", 0, 0, {"builtin", "iperf3"}},
         {"server_port", OptionType::integer, "0",
          "measure against a [[service]] (iperf3 -s) listening on this port of the server host; 0 = the probe "
          "starts its own receiver",
          0, 65535},
     }),
     {
         {"throughput", Unit::bits_per_second, true, "payload received per second of sending"},
         {"loss", Unit::fraction, false, "datagrams sent that never arrived"},
         {"loss_low", Unit::fraction, false, "low end of loss's 99% interval (Wilson)"},
         {"loss_high", Unit::fraction, false, "high end of loss's 99% interval (Wilson)"},
         {"jitter", Unit::seconds, false, "interarrival jitter (RFC 3550), at the end"},
         {"reordered", Unit::fraction, false, "datagrams that arrived after a later one"},
         {"duplicates", Unit::count, false, "copies of a datagram already received"},
         {"delay_p50", Unit::seconds, false, "median one-way delay (both ends on one clock)"},
         {"delay_p99", Unit::seconds, false, "99th percentile one-way delay"},
         {"delay_min", Unit::seconds, false, "smallest one-way delay"},
         {"delay_avg", Unit::seconds, false, "mean one-way delay"},
         {"sent", Unit::count, true, "datagrams sent"},
         {"received", Unit::count, true, "distinct datagrams received"},
     },
     {
         .main_metric = "throughput",
         .headline = {"throughput", "loss", "jitter"},
         .charted_series = {"throughput", "jitter"},
         .group_series = {"throughput", "jitter"},
         .has_server_half = true,
         .remote = RemoteTarget::external_tool,
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
         {"attempted", Unit::count, true, "probes sent (as `sent`: every kind that counts exchanges has it)"},
         {"completed", Unit::count, true, "probes answered: what the RTT figures rest on"},
         {"failed", Unit::count, false, "probes unanswered within 1 s: the RTT figures rest on the others"},
         {"timed_out", Unit::count, false, "of the failed, those that timed out (for rtt, all of them)"},
         {"failure_rate", Unit::fraction, false, "failed / attempted"},
     },
     {
         .main_metric = "rtt_avg",
         .headline = {"rtt_avg", "loss"},
         .charted_series = {"rtt"},
         .group_series = {"rtt"},
         .samples = &kRttSamples,
         .has_server_half = true,
         .remote = RemoteTarget::protocol,
         .measures_rtt = true,
         .counted = true,
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
         {"interval", OptionType::duration, "\"1s\"", "time series interval (transactions/s and latency per interval)",
          kOneMs},
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
         {"attempted", Unit::count, true, "transactions begun: completed plus failed"},
         {"completed", Unit::count, true, "transactions completed: what the latency figures rest on"},
         {"failed", Unit::count, false,
          "transactions that did not complete (as `errors`): the latency figures rest "
          "on the others"},
         {"failure_rate", Unit::fraction, false, "failed / attempted"},
     },
     {
         .main_metric = "transactions_per_second",
         .headline = {"transactions_per_second", "latency_p50", "latency_p99"},
         .charted_series = {"transactions_per_second", "latency_mean"},
         .group_series = {"transactions_per_second", "latency_mean"},
         .samples = &kLatencySamples,
         .has_server_half = true,
         .remote = RemoteTarget::never,
         .warms_up = true,
         .exchange = "transaction",
         .exchanges_metric = "transactions",
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
         {"interval", OptionType::duration, "\"1s\"", "time series interval (requests/s and latency per interval)",
          kOneMs},
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
         {"attempted", Unit::count, true, "requests sent: answered plus timed out or broken"},
         {"completed", Unit::count, true, "requests attempted less those failed"},
         {"failed", Unit::count, false,
          "requests that timed out, broke, or got a non-2xx answer (as `errors`): the "
          "latency figures rest on the answered ones"},
         {"timed_out", Unit::count, false, "of the failed, those unanswered within `timeout` (as `timeouts`)"},
         {"failure_rate", Unit::fraction, false, "failed / attempted"},
     },
     {
         .main_metric = "requests_per_second",
         .headline = {"requests_per_second", "latency_p50", "latency_p99"},
         .charted_series = {"requests_per_second", "latency_mean"},
         .group_series = {"requests_per_second", "latency_mean"},
         .samples = &kLatencySamples,
         .has_server_half = true,
         .remote = RemoteTarget::url,
         .warms_up = true,
         .exchange = "request",
         .exchanges_metric = "requests",
     }},
    {"transfer",
     "N bytes per request on a fresh (or reused) connection: completion time, time to first byte, goodput, "
     "slow start",
     common({
         {"size", OptionType::size, "\"1MiB\"", "bytes per transfer (1 byte to 16GiB)"},
         {"direction",
          OptionType::choice,
          "\"download\"",
          "download (the server sends, as an API response does) or upload",
          0,
          0,
          {"download", "upload"}},
         {"reuse", OptionType::boolean, "false",
          "a connection carries one transfer after another (keep-alive); false = a fresh connection per transfer, "
          "its handshake and slow start timed too"},
         {"parallel", OptionType::integer, "1", "connections transferring at the same time, each one after another", 1,
          256},
         {"count", OptionType::integer, "0",
          "transfers per connection per repeat, bounded by `duration`; 0 = as many as `duration` allows", 0,
          10'000'000},
         {"gap", OptionType::duration, "\"0ms\"",
          "pause between a connection's transfers (with reuse, an idle longer than the RTO restarts slow start: "
          "net.ipv4.tcp_slow_start_after_idle)",
          0},
         {"timeout", OptionType::duration, "\"30s\"", "a transfer unfinished this long fails (timed out)", kOneMs},
         {"congestion_control", OptionType::string, "\"\"", "TCP_CONGESTION on both ends; empty = the sysctl"},
         {"sndbuf", OptionType::size, "0", "SO_SNDBUF on both ends; 0 = autotuning"},
         {"rcvbuf", OptionType::size, "0", "SO_RCVBUF on both ends; 0 = autotuning"},
         {"url", OptionType::string, "\"\"",
          "tool curl: http://ADDRESS[:PORT][/PATH] to fetch (a [[service]]); empty = wanlab's built-in http "
          "server sending `size` bytes"},
         {"tool", OptionType::choice, "\"builtin\"", "builtin or curl", 0, 0, {"builtin", "curl"}},
     }),
     {
         {"completion_p50", Unit::seconds, false,
          "median time from the transfer's start (before connect) to its last byte"},
         {"completion_p90", Unit::seconds, false, "90th percentile completion time"},
         {"completion_p99", Unit::seconds, false, "99th percentile completion time"},
         {"completion_mean", Unit::seconds, false, "mean completion time"},
         {"completion_max", Unit::seconds, false, "slowest transfer"},
         {"ttfb_p50", Unit::seconds, false, "median time to the first byte of a download (connect included)"},
         {"ttfb_p99", Unit::seconds, false, "99th percentile time to first byte"},
         {"connect_p50", Unit::seconds, false, "median TCP handshake of a fresh connection"},
         {"goodput", Unit::bits_per_second, true,
          "bytes of the completed transfers over the time they took: the rate one transfer sees"},
         {"throughput", Unit::bits_per_second, true,
          "bytes of the completed transfers over the repeat: all connections together"},
         {"slow_start_share", Unit::fraction, true,
          "transfers that ended while their sender was still in its initial slow start (built-in only)"},
         {"retransmits", Unit::count, false, "segments the senders retransmitted during the transfers (built-in only)"},
         {"transfers", Unit::count, true, "completed transfers"},
         {"errors", Unit::count, false, "transfers that timed out, broke, or got a non-2xx answer"},
         {"timeouts", Unit::count, false, "transfers unfinished within `timeout`"},
         {"attempted", Unit::count, true, "transfers begun: completed plus failed"},
         {"completed", Unit::count, true, "transfers completed: what the completion figures rest on"},
         {"failed", Unit::count, false,
          "transfers that did not complete (as `errors`): the figures rest on the others"},
         {"timed_out", Unit::count, false, "of the failed, those unfinished within `timeout` (as `timeouts`)"},
         {"failure_rate", Unit::fraction, false, "failed / attempted"},
     },
     {
         .main_metric = "completion_p50",
         .headline = {"completion_p50", "completion_p99", "goodput"},
         .charted_series = {"completion_time"},
         .group_series = {"completion_time"},
         .samples = &kCompletionSamples,
         .has_server_half = true,
         .remote = RemoteTarget::url,
         .exchange = "transfer",
         .exchanges_metric = "transfers",
     }},
    {"command",
     "your own command, timed per repeat on the client host; more metrics from its output",
     common({
         {"timeout", OptionType::duration, "\"10min\"", "a repeat still running after this is killed: its error",
          kOneMs},
     }),
     {
         {"wall_time", Unit::seconds, false, "from the start of the command to its exit"},
     },
     {
         .main_metric = "wall_time",
         .headline = {"wall_time"},
         .runs_here_only = true,
         .user_command = true,
     }},
};

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
        if (o.type == OptionType::rate)  // in base units, as read_option() gives a written one
            return static_cast<std::int64_t>(std::get<std::uint64_t>(units::parse_rate(s)));
        if (o.type == OptionType::size) return static_cast<std::int64_t>(std::get<std::uint64_t>(units::parse_size(s)));
        return s;
    }
    if (o.type == OptionType::boolean) return d == "true";
    return static_cast<std::int64_t>(std::stoll(std::string(d)));
}

std::int64_t int_of(const ProbeSpec& spec, const char* option) {
    auto v = std::get_if<std::int64_t>(&spec.options.at(option));
    return v ? *v : 0;
}

// One of a command probe's `metrics`.
std::optional<OutputMetric> parse_output_metric(const Node& table, const ProbeSpec& spec, std::size_t i,
                                                Diagnostics& diag) {
    Reader r(table, fmt::format("probe `{}` metrics #{}", spec.name, i + 1), diag);
    OutputMetric m;
    bool ok = true;
    auto fail = [&](const Location& at, const std::string& why) {
        diag.error(at, why);
        ok = false;
    };
    auto name = r.string("name");
    if (!name || !text::valid_name(*name) || *name == "wall_time")
        fail(r.has("name") ? r.value_at("name") : table.value_at,
             "a metric needs a `name`: 1-64 letters, digits, `-` or `_`, not wall_time (wanlab's own)");
    else if (std::any_of(spec.outputs.begin(), spec.outputs.end(), [&](const auto& o) { return o.name == *name; }))
        fail(r.value_at("name"), fmt::format("two metrics of probe `{}` are named `{}`", spec.name, *name));
    else
        m.name = *name;
    auto regex = r.string("regex");
    auto pointer = r.string("json");
    if (auto stream = r.choice("stream", {"stdout", "stderr"})) m.stream = *stream;
    if (regex.has_value() == pointer.has_value())
        fail(table.value_at, "a metric needs exactly one of `regex` (with a named group) or `json` (a JSON pointer)");
    if (regex) {
        try {
            Pattern p(*regex);
            auto groups = p.group_names();
            if (std::find(groups.begin(), groups.end(), "value") != groups.end())
                m.group = "value";
            else if (groups.size() == 1)
                m.group = groups.front();
            else
                fail(r.value_at("regex"), groups.empty() ? "the regex needs a named group for the number, such as "
                                                           "\"time=(?<value>[0-9.]+)\""
                                                         : "the regex has several named groups: name the number's "
                                                           "`value`");
            m.regex = *regex;
        } catch (const InputError& e) {
            fail(r.value_at("regex"), e.what());
        }
    }
    if (pointer) {
        std::string why;
        if (!valid_json_pointer(*pointer, why))
            fail(r.value_at("json"),
                 fmt::format("`json` = \"{}\" is not a JSON pointer (\"/end/sum/seconds\"): {}", *pointer, why));
        if (r.has("stream")) fail(r.key_at("stream"), "`stream` goes with `regex`; `json` reads stdout");
        m.json_pointer = *pointer;
    }
    if (auto unit = r.string("unit")) {
        m.unit_text = *unit;
        if (!output_unit(*unit, m.unit, m.scale))
            fail(r.value_at("unit"), fmt::format("`unit` = \"{}\" is not one of s, ms, us, ns, bit/s, kbit/s, Mbit/s, "
                                                 "Gbit/s, bytes, KiB, MiB, GiB, 1/s, count, fraction, %",
                                                 *unit));
    } else {
        fail(table.value_at, "a metric needs a `unit` (s, ms, bit/s, bytes, 1/s, count, %, ...)");
    }
    if (auto better = r.choice("better", {"higher", "lower"}))
        m.higher_is_better = *better == "higher";
    else if (!r.has("better"))
        fail(table.value_at, "a metric needs `better` = \"higher\" or \"lower\": what min_gain counts as a gain");
    r.finish();
    if (!ok) return std::nullopt;
    return m;
}

// A `url` option's form: placeholders it may hold, and the URL it becomes.
void check_url(const ProbeSpec& spec, const Reader& r, Diagnostics& diag) {
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
}

// The http kind's checks across and within options.
void check_http(const ProbeSpec& spec, const Reader& r, Diagnostics& diag) {
    check_url(spec, r, diag);
    if (int_of(spec, "threads") > int_of(spec, "connections"))
        diag.error(r.value_at("threads"),
                   fmt::format("`threads` ({}) is more than `connections` ({}): each thread needs a connection",
                               int_of(spec, "threads"), int_of(spec, "connections")));
    if (int_of(spec, "timeout") <= 0) diag.error(r.value_at("timeout"), "`timeout` must be above zero");
    if (int_of(spec, "response_size") > 64 * 1024 * 1024)
        diag.error(r.value_at("response_size"), "`response_size` must be at most 64MiB");
}

// The transfer kind's checks: its size, and what tool = "curl" cannot do.
void check_transfer(const ProbeSpec& spec, const Reader& r, Diagnostics& diag) {
    check_url(spec, r, diag);
    auto size = int_of(spec, "size");
    if (size < 1 || static_cast<std::uint64_t>(size) > (std::uint64_t{16} << 30))
        diag.error(r.value_at("size"), fmt::format("`size` = {} is outside 1 byte to 16GiB", size));
    bool curl = std::get<std::string>(spec.options.at("tool")) == "curl";
    bool url = !std::get<std::string>(spec.options.at("url")).empty();
    if (!curl) {
        if (url)
            diag.error(r.value_at("url"),
                       "`url` goes with tool = \"curl\": the built-in client talks to wanlab's own "
                       "transfer server only");
        return;
    }
    if (!std::get<std::string>(spec.options.at("congestion_control")).empty())
        diag.error(r.value_at("congestion_control"),
                   "curl cannot choose a socket's congestion control: use the built-in tool, or set "
                   "sysctl.\"net.ipv4.tcp_congestion_control\" in a variant");
    for (const char* buffer : {"sndbuf", "rcvbuf"})
        if (int_of(spec, buffer) != 0)
            diag.error(r.value_at(buffer), fmt::format("curl asks for no `{}`: use the built-in tool, or set "
                                                       "sysctl.\"net.ipv4.tcp_rmem\" / tcp_wmem in a variant",
                                                       buffer));
    if (std::get<std::string>(spec.options.at("direction")) == "upload" && !url)
        diag.error(r.value_at("direction"),
                   "an upload with curl needs a `url` that takes a POST: wanlab's built-in http server answers GET "
                   "only (the built-in tool uploads to its own server)");
    if (!url && size > 64 * 1024 * 1024)
        diag.error(r.value_at("size"), "curl against the built-in http server fetches at most 64MiB per transfer");
    if (std::get<bool>(spec.options.at("reuse")) && int_of(spec, "count") == 0)
        diag.error(r.value_at("reuse"),
                   "tool = \"curl\" with `reuse` needs `count`: one curl process fetches that "
                   "many over one connection");
    if (std::get<bool>(spec.options.at("reuse")) && int_of(spec, "gap") > 0)
        diag.error(r.value_at("gap"),
                   "tool = \"curl\" cannot pause between the transfers of one connection: "
                   "drop `gap`, or `reuse`, or use the built-in tool");
}

// kind = "command": its argv and the metrics read from its output.
void parse_command(ProbeSpec& spec, Reader& r, Diagnostics& diag) {
    const Node* cmd = r.raw("command");
    const toml::array* arr = cmd && cmd->kind == Node::Kind::value ? cmd->value->as_array() : nullptr;
    if (!cmd) {
        diag.error(spec.at, fmt::format("probe `{}` of kind \"command\" needs `command`: its argv, such as "
                                        "[\"curl\", \"-so\", \"/dev/null\", \"http://{{server}}:8080/\"]",
                                        spec.name));
    } else if (!arr || arr->empty() || !arr->is_homogeneous(toml::node_type::string)) {
        diag.error(cmd->value_at, "`command` must be a non-empty array of strings (argv, never a shell string)");
    } else {
        for (std::size_t i = 0; i < arr->size(); ++i) {
            std::string word = *(*arr)[i].value_exact<std::string>();
            std::size_t at = 0;
            if (i == 0 && (word.empty() || !text::placeholders(word).empty()))
                diag.error(config::element(*cmd, 0).value_at,
                           "the program of `command` is a name or a path, "
                           "without placeholders");
            else if (auto why = text::unknown_placeholder(word, kUrlPlaceholders, at); !why.empty())
                diag.error(config::element(*cmd, i).value_at, fmt::format("`command` element {}: {}", i + 1, why));
            spec.command.push_back(std::move(word));
        }
    }
    const Node* metrics = r.raw("metrics");
    if (!metrics) return;
    if (metrics->kind != Node::Kind::table_array) {
        diag.error(metrics->value_at,
                   "`metrics` must be an array of tables, such as "
                   "[{ name = \"ttfb\", regex = \"ttfb=(?<value>[0-9.]+)\", unit = \"s\", "
                   "better = \"lower\" }]");
        return;
    }
    for (std::size_t i = 0; i < metrics->items.size(); ++i)
        if (auto m = parse_output_metric(metrics->items[i], spec, i, diag)) spec.outputs.push_back(std::move(*m));
}

}  // namespace

const std::vector<ProbeKind>& probe_kinds() { return kKinds; }

const ProbeKind& group_kind() {
    static const ProbeKind kGroup{
        "group",
        "probes that ran at the same time, seen together",
        {},
        {
            {"fairness", Unit::fraction, true, "Jain's index over every flow of the group's throughput probes"},
            {"throughput", Unit::bits_per_second, true, "goodput of the group's throughput probes, summed"},
            {"flows", Unit::count, true, "TCP connections of the group's throughput probes"},
            {"members", Unit::count, true, "probes of the group that measured"},
        },
        {
            .main_metric = "fairness",
            .headline = {"fairness", "throughput"},
            .charts_recorded_series = true,
        }};
    return kGroup;
}

const ProbeKind* find_kind(std::string_view name) {
    for (const auto& k : kKinds)
        if (name == k.name) return &k;
    if (name == "group") return &group_kind();
    return nullptr;
}

const ProbeTraits& traits_of(std::string_view kind) {
    static const ProbeTraits kUnknown{};
    const ProbeKind* k = find_kind(kind);
    return k ? k->traits : kUnknown;
}

const char* main_metric(std::string_view kind) { return traits_of(kind).main_metric; }

const MetricSpec* find_metric(const ProbeKind& kind, std::string_view metric) {
    for (const auto& m : kind.metrics)
        if (metric == m.name) return &m;
    return nullptr;
}

bool output_unit(std::string_view word, Unit& unit, double& scale) {
    struct Word {
        const char* word;
        Unit unit;
        double scale;
    };
    static const Word kWords[] = {
        {"s", Unit::seconds, 1},
        {"ms", Unit::seconds, 1e-3},
        {"us", Unit::seconds, 1e-6},
        {"ns", Unit::seconds, 1e-9},
        {"bit/s", Unit::bits_per_second, 1},
        {"kbit/s", Unit::bits_per_second, 1e3},
        {"Mbit/s", Unit::bits_per_second, 1e6},
        {"Gbit/s", Unit::bits_per_second, 1e9},
        {"bytes", Unit::bytes, 1},
        {"KiB", Unit::bytes, 1024},
        {"MiB", Unit::bytes, 1048576},
        {"GiB", Unit::bytes, 1073741824},
        {"1/s", Unit::per_second, 1},
        {"count", Unit::count, 1},
        {"fraction", Unit::fraction, 1},
        {"%", Unit::fraction, 0.01},
    };
    for (const auto& w : kWords)
        if (word == w.word) {
            unit = w.unit;
            scale = w.scale;
            return true;
        }
    return false;
}

bool unit_of_name(std::string_view name, Unit& unit) {
    for (Unit u : {Unit::bits_per_second, Unit::seconds, Unit::fraction, Unit::count, Unit::per_second, Unit::bytes})
        if (name == unit_name(u)) {
            unit = u;
            return true;
        }
    return false;
}

double planned_seconds(const ProbeSpec& p) {
    auto d = p.options.find("duration");
    double s = d != p.options.end() ? static_cast<double>(std::get<std::int64_t>(d->second)) / 1e9 : 0;
    auto count = p.options.find("count"), interval = p.options.find("interval");
    if (count != p.options.end() && interval != p.options.end())
        s = std::min(s, static_cast<double>(std::get<std::int64_t>(count->second)) *
                            static_cast<double>(std::get<std::int64_t>(interval->second)) / 1e9);
    return s;
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
                   fmt::format("[[probe]] #{} needs `kind`: one of throughput, udp, rtt, rr, http, transfer, command",
                               index + 1));
    auto name = head.string("name");
    if (name && !text::valid_name(*name))
        diag.error(head.value_at("name"),
                   fmt::format("probe name \"{}\" must be 1-64 letters, digits, `-` or `_`", *name));
    const ProbeKind* kind = kind_name ? find_kind(*kind_name) : nullptr;
    if (!kind) return spec;  // options cannot be checked without a kind
    spec.kind = kind->name;
    spec.name = name && text::valid_name(*name) ? *name : kind->name;
    Reader r(table, fmt::format("[[probe]] \"{}\" (kind {})", spec.name, spec.kind), diag);
    r.raw("kind");
    r.raw("name");
    for (const auto& o : kind->options) {
        if (r.has(o.name)) spec.written.insert(o.name);
        auto v = read_option(r, o);
        spec.options[o.name] = v ? *v : default_of(o, default_duration);
    }
    if (auto g = std::get_if<std::string>(&spec.options["group"]); g && !g->empty() && !text::valid_name(*g))
        diag.error(r.value_at("group"), fmt::format("group name \"{}\" must be 1-64 letters, digits, `-` or `_`", *g));
    if (auto d = std::get_if<std::int64_t>(&spec.options["duration"]); d && *d <= 0)
        diag.error(r.value_at("duration"), "`duration` must be above zero");
    if (spec.kind == "http") check_http(spec, r, diag);
    if (spec.kind == "transfer") check_transfer(spec, r, diag);
    if (spec.kind == "udp") {
        if (auto rate = std::get_if<std::int64_t>(&spec.options["rate"]); rate && *rate <= 0)
            diag.error(r.value_at("rate"), "`rate` must be above zero: the udp probe sends at this pace");
        else if (rate && static_cast<std::uint64_t>(*rate) > kMaxUdpRate)
            diag.error(r.value_at("rate"), fmt::format("`rate` = {} is above {}, more than one sender's socket carries",
                                                       units::format_rate(static_cast<std::uint64_t>(*rate)),
                                                       units::format_rate(kMaxUdpRate)));
        auto size = std::get_if<std::int64_t>(&spec.options["size"]);
        if (size && (*size < 24 || *size > 65507))
            diag.error(r.value_at("size"),
                       fmt::format("`size` = {} is outside 24-65507 bytes: a datagram carries wanlab's 24-byte "
                                   "header and at most 65507 bytes over IPv4",
                                   *size));
    }
    if (spec.kind == "command") parse_command(spec, r, diag);
    r.finish();
    return spec;
}

std::string spec_problem(const ProbeSpec& spec) {
    if (!text::valid_name(spec.name)) return "`name` must be 1-64 letters, digits, `-` or `_`";
    const ProbeKind* kind = find_kind(spec.kind);
    if (!kind) return fmt::format("`kind` \"{}\" is not a probe kind", text::terminal_safe(spec.kind.substr(0, 64)));
    for (const auto& option : spec.options) {
        const auto& name = option.first;  // clang 14 cannot capture a structured binding
        auto o = std::find_if(kind->options.begin(), kind->options.end(),
                              [&name](const OptionSpec& x) { return name == x.name; });
        if (o == kind->options.end())
            return fmt::format("option `{}` is not one of kind {}'s", text::terminal_safe(name.substr(0, 64)),
                               kind->name);
    }
    for (const auto& o : kind->options) {
        auto it = spec.options.find(o.name);
        if (it == spec.options.end()) return fmt::format("option `{}` is missing", o.name);
        const auto* i = std::get_if<std::int64_t>(&it->second);
        const auto* s = std::get_if<std::string>(&it->second);
        std::string why;
        switch (o.type) {
            case OptionType::duration: {
                auto max = o.max ? o.max : static_cast<std::int64_t>(config::kMaxDuration.count());
                if (!i || *i < o.min || *i > max) why = fmt::format("must be a duration from {} to {} ns", o.min, max);
                break;
            }
            case OptionType::integer:
                if (!i || *i < o.min || (o.max && *i > o.max))
                    why = o.max ? fmt::format("must be a whole number from {} to {}", o.min, o.max)
                                : fmt::format("must be a whole number of at least {}", o.min);
                break;
            case OptionType::size:
            case OptionType::rate:
                if (!i || *i < 0) why = "must be a whole number of at least 0";
                break;
            case OptionType::percent: {
                const auto* d = std::get_if<double>(&it->second);
                if (!d || !(*d >= 0 && *d <= 1)) why = "must be a fraction from 0 to 1";
                break;
            }
            case OptionType::boolean:
                if (!std::holds_alternative<bool>(it->second)) why = "must be true or false";
                break;
            case OptionType::choice:
                if (!s || std::find(o.choices.begin(), o.choices.end(), *s) == o.choices.end())
                    why = fmt::format("must be one of {}", fmt::join(o.choices, ", "));
                break;
            case OptionType::string:
                if (!s || s->size() > (1u << 20)) why = "must be a string of at most 1 MiB";
                break;
        }
        if (!why.empty()) return fmt::format("option `{}` {}", o.name, why);
    }
    if (auto d = spec.options.find("duration"); d != spec.options.end() && std::get<std::int64_t>(d->second) <= 0)
        return "option `duration` must be above zero";
    if (spec.kind == "udp") {
        auto rate = std::get<std::int64_t>(spec.options.at("rate"));
        auto size = std::get<std::int64_t>(spec.options.at("size"));
        if (rate <= 0 || static_cast<std::uint64_t>(rate) > kMaxUdpRate)
            return fmt::format("option `rate` must be above zero and at most {}", units::format_rate(kMaxUdpRate));
        if (size < 24 || size > 65507) return "option `size` must be 24-65507 bytes";
    }
    return "";
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
