// iperf3, ping and hping3: their parsers and how each is started. See docs/probes.md.
#include "probes/external.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <regex>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json.h"
#include "probes/sockets.h"
#include "probes/stats.h"
#include "probes/udp.h"

namespace wanlab::probes {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

double number_at(const json& j, const json::json_pointer& p) {
    return j.contains(p) && j.at(p).is_number() ? j.at(p).get<double>() : 0.0;
}

void rtt_metrics(ProbeResult& r, double sent, double received) {
    const auto& x = r.samples["rtt"];
    auto q = stats::percentiles(x, {50, 99});
    r.metrics["rtt_p50"] = q[0];
    r.metrics["rtt_p99"] = q[1];
    r.metrics["loss"] = sent > 0 ? 1 - received / sent : 0;
    r.metrics["sent"] = sent;
}

/// `iperf3 -s -1` in `at`'s namespace, once it listens on `port` (within 5 s).
sys::Process start_iperf3_server(const std::string& exe, const Endpoint& at, std::uint16_t port) {
    sys::Process server(at.netns, {exe, "-s", "-1", "-B", at.address, "-p", std::to_string(port)});
    if (!await_tcp_listening(at.netns, port, 5s))
        throw Error(fmt::format("iperf3 -s did not listen on port {} within 5 s", port));
    return server;
}

std::string seconds_arg(std::chrono::nanoseconds d) {
    return fmt::format("{:g}", std::chrono::duration<double>(d).count());
}

// What iperf3 reports per interval of each stream it sends on: cwnd (bytes, as segments of
// tcp_mss_default), the smoothed RTT, retransmits and the peer's window. A receiving stream
// has none of these (iperf3 leaves them out or writes 0).
void iperf3_stream_series(const json& interval, double at, double mss, SeriesMap& out) {
    if (!interval.contains("streams") || !interval["streams"].is_array()) return;
    int n = 0;
    for (const auto& s : interval["streams"]) {
        ++n;
        if (!s.is_object() || !s.value("sender", false)) continue;
        auto name = [n](const char* field) { return fmt::format("stream{}.{}", n, field); };
        if (double cwnd = number_at(s, "/snd_cwnd"_json_pointer); cwnd > 0 && mss > 0)
            out[name("cwnd")].add(at, cwnd / mss);
        if (double rtt = number_at(s, "/rtt"_json_pointer); rtt > 0) out[name("srtt")].add(at, rtt / 1e6);
        if (s.contains("retransmits")) out[name("retransmits")].add(at, number_at(s, "/retransmits"_json_pointer));
        if (double wnd = number_at(s, "/snd_wnd"_json_pointer); wnd > 0) out[name("snd_wnd")].add(at, wnd);
    }
}

}  // namespace

ProbeResult parse_iperf3_json(const std::string& text) {
    json j = json_input::parse(text);
    if (j.is_discarded() || !j.is_object()) throw Error("iperf3 -J printed something that is not JSON");
    // iperf3's own refusal of this test (a clamped -w, an unreachable server): the measurement's.
    if (j.contains("error")) throw MeasurementError("iperf3: " + j["error"].get<std::string>());
    if (!j.contains("end") || !j["end"].contains("sum_received"))
        throw Error("iperf3 -J output has no end.sum_received (did the test run?)");
    ProbeResult r;
    r.kind = "throughput";
    r.tool = "iperf3";
    const json& end = j["end"];
    auto& m = r.metrics;
    bool bidir = end.contains("sum_received_bidir_reverse");
    bool reverse = number_at(j, "/start/test_start/reverse"_json_pointer) != 0;
    double forward = number_at(end, "/sum_received/bits_per_second"_json_pointer);
    double back = bidir ? number_at(end, "/sum_received_bidir_reverse/bits_per_second"_json_pointer) : 0;
    m["throughput"] = forward + back;
    m["throughput_upload"] = reverse ? back : forward;
    m["throughput_download"] = reverse ? forward : back;
    m["retransmits"] = number_at(end, "/sum_sent/retransmits"_json_pointer) +
                       (bidir ? number_at(end, "/sum_sent_bidir_reverse/retransmits"_json_pointer) : 0);
    double mss = number_at(j, "/start/tcp_mss_default"_json_pointer);
    double rtt_sum = 0, rtt_n = 0, cwnd_sum = 0, cwnd_n = 0;
    if (end.contains("streams"))
        for (const auto& s : end["streams"]) {
            if (!s.contains("sender")) continue;
            const auto& snd = s["sender"];
            // Only the sending host knows the RTT; iperf3 writes 0 for the other side's streams.
            double mean_rtt = snd.value("mean_rtt", 0.0);
            if (mean_rtt > 0) rtt_sum += mean_rtt / 1e6, ++rtt_n;
            ConnectionStats c;
            c.direction = snd.value("sender", true) ? "upload" : "download";  // is this host the sender?
            c.values["throughput"] = snd.value("bits_per_second", 0.0);
            c.values["retransmits"] = snd.value("retransmits", 0.0);
            if (mean_rtt > 0) c.values["rtt"] = mean_rtt / 1e6;
            r.connections.push_back(std::move(c));
        }
    if (j.contains("intervals") && !j["intervals"].empty()) {
        for (const auto& iv : j["intervals"]) {
            double bps = number_at(iv, "/sum/bits_per_second"_json_pointer) +
                         number_at(iv, "/sum_bidir_reverse/bits_per_second"_json_pointer);
            double at = number_at(iv, "/sum/end"_json_pointer);
            r.series["throughput"].add(at, bps);
            iperf3_stream_series(iv, at, mss, r.series);
        }
        for (const auto& s : j["intervals"].back()["streams"])
            if (s.contains("snd_cwnd") && mss > 0) cwnd_sum += s["snd_cwnd"].get<double>() / mss, ++cwnd_n;
    }
    if (rtt_n > 0) m["rtt"] = rtt_sum / rtt_n;
    if (cwnd_n > 0) m["cwnd"] = cwnd_sum / cwnd_n;
    r.notes.push_back(
        "iperf3: throughput as its receiver counted it; rtt is the sender's mean over the test, cwnd at "
        "the last interval (bytes / tcp_mss_default)");
    if (end.contains("sender_tcp_congestion"))
        r.notes.push_back("iperf3: congestion control " + end["sender_tcp_congestion"].get<std::string>());
    return r;
}

ProbeResult parse_ping(const std::string& text, double interval_s) {
    static const std::regex kReply(R"(icmp_seq=(\d+) .*time=([\d.]+) ms)");
    static const std::regex kCounts(R"((\d+) packets transmitted, (\d+) received)");
    static const std::regex kSummary(
        R"((?:rtt|round-trip) min/avg/max/(?:mdev|stddev) = ([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+) ms)");
    ProbeResult r;
    r.kind = "rtt";
    r.tool = "ping";
    std::smatch m;
    std::istringstream in(text);
    std::string line;
    auto& rtts = r.samples["rtt"];
    while (std::getline(in, line))
        if (std::regex_search(line, m, kReply) && line.find("DUP!") == std::string::npos) {
            rtts.push_back(std::stod(m[2]) / 1e3);
            // icmp_seq counts from 1, one every interval from the start.
            if (interval_s > 0) r.series["rtt"].add((std::stod(m[1]) - 1) * interval_s, rtts.back());
        }
    if (!std::regex_search(text, m, kCounts))
        throw Error("ping output has no \"N packets transmitted, M received\" line");
    double sent = std::stod(m[1]), received = std::stod(m[2]);
    if (std::regex_search(text, m, kSummary)) {
        r.metrics["rtt_min"] = std::stod(m[1]) / 1e3;
        r.metrics["rtt_avg"] = std::stod(m[2]) / 1e3;
        r.metrics["rtt_max"] = std::stod(m[3]) / 1e3;
        r.metrics["rtt_mdev"] = std::stod(m[4]) / 1e3;
    } else if (received > 0) {
        throw Error("ping output has replies but no \"rtt min/avg/max/mdev\" line");
    }
    rtt_metrics(r, sent, received);
    return r;
}

ProbeResult parse_hping3(const std::string& text, double interval_s) {
    // Replies go to stdout, "len=44 ip=... flags=SA seq=0 win=64240 rtt=0.2 ms"; the statistics
    // to stderr. Duplicates start with "DUP!" and are not samples.
    static const std::regex kReply(R"(^len=\d+ .*flags=(\w+) .*seq=(\d+) .*rtt=([\d.]+) ms)");
    static const std::regex kCounts(R"((\d+) packets transmitted, (\d+) packets received)");
    static const std::regex kSummary(R"(round-trip min/avg/max = ([\d.]+)/([\d.]+)/([\d.]+) ms)");
    ProbeResult r;
    r.kind = "rtt";
    r.tool = "hping3";
    std::smatch m;
    std::istringstream in(text);
    std::string line;
    auto& rtts = r.samples["rtt"];
    std::size_t resets = 0;
    while (std::getline(in, line))
        if (std::regex_search(line, m, kReply)) {
            rtts.push_back(std::stod(m[3]) / 1e3);
            // seq counts from 0, one every interval from the start.
            if (interval_s > 0) r.series["rtt"].add(std::stod(m[2]) * interval_s, rtts.back());
            resets += m[1].str().find('R') != std::string::npos;
        }
    if (!std::regex_search(text, m, kCounts))
        throw Error("hping3 output has no \"N packets transmitted, M packets received\" line");
    double sent = std::stod(m[1]), received = std::stod(m[2]);
    // With nothing received hping3 still prints "0.0/0.0/0.0": no figures then.
    if (received > 0 && std::regex_search(text, m, kSummary)) {
        r.metrics["rtt_min"] = std::stod(m[1]) / 1e3;
        r.metrics["rtt_avg"] = std::stod(m[2]) / 1e3;
        r.metrics["rtt_max"] = std::stod(m[3]) / 1e3;
    } else if (received > 0) {
        throw Error("hping3 output has replies but no \"round-trip min/avg/max\" line");
    }
    if (!rtts.empty()) r.metrics["rtt_mdev"] = stats::mdev(rtts);
    rtt_metrics(r, sent, received);
    r.notes.push_back("hping3: rtt in 0.1 ms steps, timed in user space; rtt_mdev and percentiles from its rtt= lines");
    if (resets > 0)
        r.notes.push_back(fmt::format("hping3: {} answers were RST (nothing listening on that port)", resets));
    return r;
}

namespace {

/// One `iperf3 -c` run of `spec` with `options` after the common ones (-c, -p, -J, -t, -i;
/// -R for a download, -B for a client address), against `iperf3 -s -1` started in the
/// server's namespace, or against a remote target's own iperf3 -s. Its output, once it exited
/// or crashed with JSON; throws when it timed out or crashed without any. A UDP run that
/// timed out is made once more (`retried` says why): iperf3's lost connect datagram.
struct Iperf3Run {
    sys::ProcessOutput out;
    std::vector<std::string> argv;
    bool own_server = false;
    std::string retried;  // why the run was made again, or ""
};

Iperf3Run iperf3_client(const ProbeSpec& spec, const Endpoints& where, const std::vector<std::string>& options,
                        const Tick& tick, bool retry = true) {
    const bool udp = std::find(options.begin(), options.end(), "-u") != options.end();
    check_remote(spec, where.server);
    std::string exe = sys::find_tool("iperf3");
    std::uint16_t port = where.server.port ? where.server.port : 5201;
    auto duration = std::chrono::nanoseconds(option_int(spec, "duration"));
    // A remote target runs its own `iperf3 -s`.
    std::optional<sys::Process> server;
    if (!where.server.remote) server.emplace(start_iperf3_server(exe, where.server, port));
    Iperf3Run run;
    run.own_server = server.has_value();
    run.argv = {
        exe,  "-c", where.server.address,  "-p", std::to_string(port),
        "-J", "-t", seconds_arg(duration), "-i", seconds_arg(std::chrono::nanoseconds(option_int(spec, "interval")))};
    run.argv.insert(run.argv.end(), options.begin(), options.end());
    if (option_string(spec, "direction") == "download") run.argv.push_back("-R");
    if (!where.client.address.empty()) run.argv.insert(run.argv.end(), {"-B", where.client.address});
    sys::Process client(where.client.netns, run.argv);
    run.out = client.wait(std::chrono::duration_cast<std::chrono::milliseconds>(duration) + 15s, tick);
    if (server) server->stop(2s);
    if (run.out.timed_out && udp) {
        // iperf3 opens a UDP test with one datagram (its cookie) that it never sends again: when
        // the path loses it, the client waits for the answer forever (esnet/iperf#351, #862;
        // 2% loss ends one run in 50 so). One more run, said in the notes.
        if (!retry)
            throw Error(
                "iperf3 -u -c did not finish in time (killed), twice: the path lost its UDP connect "
                "datagram, which iperf3 never sends again (esnet/iperf#351), or the test hung");
        auto again = iperf3_client(spec, where, options, tick, false);
        again.retried =
            "iperf3 -u: the first run hung (killed after the duration + 15 s), as iperf3 does when the "
            "path loses the one datagram that opens its UDP test (esnet/iperf#351); this is a second run";
        return again;
    }
    if (run.out.timed_out) throw Error("iperf3 -c did not finish in time (killed)");
    // With -J, iperf3 reports its own errors inside the JSON; anything else is a crash.
    if (!sys::exited_ok(run.out) && run.out.out.find('{') == std::string::npos)
        throw Error(
            fmt::format("iperf3 -c {}: {}", sys::describe_status(run.out.status), sys::tail_lines(run.out.err)));
    return run;
}

/// The notes every iperf3 result carries: its command, and who ran its server.
void iperf3_notes(ProbeResult& r, const Iperf3Run& run) {
    r.notes.push_back("command: " + fmt::format("{}", fmt::join(run.argv, " ")));
    if (!run.retried.empty()) r.notes.push_back(run.retried);
    if (!run.own_server) r.notes.push_back("remote target: its own iperf3 -s answered; wanlab started none");
}

}  // namespace

ProbeResult run_iperf3(const ProbeSpec& spec, const Endpoints& where, const Tick& tick) {
    std::vector<std::string> options{"-P", std::to_string(option_int(spec, "streams"))};
    if (option_string(spec, "direction") == "both") options.push_back("--bidir");
    if (auto cc = option_string(spec, "congestion_control"); !cc.empty()) options.insert(options.end(), {"-C", cc});
    // iperf3 has one -w for both buffers; the larger of the two asks is the closest match.
    const auto w = std::max(option_int(spec, "sndbuf"), option_int(spec, "rcvbuf"));
    if (w > 0) options.insert(options.end(), {"-w", std::to_string(w)});
    auto run = iperf3_client(spec, where, options, tick);
    ProbeResult r;
    try {
        r = parse_iperf3_json(run.out.out);
    } catch (const MeasurementError& e) {
        std::string why = e.what();
        if (w > 0 && why.find("socket buffer size not set correctly") != std::string::npos)
            why += fmt::format(
                "; iperf3 refuses a -w the kernel clamps: -w {} needs net.core.rmem_max and net.core.wmem_max of at "
                "least {} bytes in this trial (the kernel grants twice the ask, up to twice the maximum), or leave "
                "rcvbuf and sndbuf at 0 for autotuning",
                w, (w + 1) / 2);
        throw MeasurementError(why);
    }
    iperf3_notes(r, run);
    if (w == 0) {
        r.notes.push_back(std::string(kRcvbufAutotuned) + " on the receiver: no -w asked");
        r.notes.push_back(std::string(kSndbufAutotuned) + " on the sender: no -w asked");
    } else {
        r.notes.push_back(
            fmt::format("iperf3 -w {}: SO_SNDBUF and SO_RCVBUF asked on both ends, capped by "
                        "net.core.wmem_max and rmem_max (autotuning off)",
                        w));
    }
    return r;
}

ProbeResult parse_iperf3_udp_json(const std::string& text) {
    json j = json_input::parse(text);
    if (j.is_discarded() || !j.is_object()) throw Error("iperf3 -J printed something that is not JSON");
    if (j.contains("error")) throw MeasurementError("iperf3: " + j["error"].get<std::string>());
    if (!j.contains("end") || !j["end"].contains("sum_received"))
        throw Error("iperf3 -u -J output has no end.sum_received (did the test run?)");
    const json& got = j["end"]["sum_received"];
    // The receiver's count: `packets` it expected (by sequence number), `lost_packets` of them.
    double packets = number_at(got, "/packets"_json_pointer), lost = number_at(got, "/lost_packets"_json_pointer);
    double received = std::max(0.0, packets - lost);
    ProbeResult r;
    r.kind = "udp";
    r.tool = "iperf3";
    auto& m = r.metrics;
    m["throughput"] = number_at(got, "/bits_per_second"_json_pointer);
    m["sent"] = number_at(j, "/end/sum_sent/packets"_json_pointer);
    m["received"] = received;
    loss_metrics(m, lost, packets);
    m["jitter"] = number_at(got, "/jitter_ms"_json_pointer) / 1e3;
    double out_of_order = 0;
    for (const auto& s : j["end"].value("streams", json::array()))
        out_of_order += number_at(s, "/udp/out_of_order"_json_pointer);
    if (received > 0) m["reordered"] = out_of_order / received;
    for (const auto& iv : j.value("intervals", json::array()))
        r.series["throughput"].add(number_at(iv, "/sum/end"_json_pointer),
                                   number_at(iv, "/sum/bits_per_second"_json_pointer));
    r.notes.push_back(
        "iperf3 -u: loss, jitter and out-of-order from its receiver's report; no one-way delay, no duplicates; the "
        "interval series is the sender's");
    return r;
}

ProbeResult run_iperf3_udp(const ProbeSpec& spec, const Endpoints& where, const Tick& tick) {
    auto run = iperf3_client(
        spec, where,
        {"-u", "-b", std::to_string(option_int(spec, "rate")), "-l", std::to_string(option_int(spec, "size"))}, tick);
    auto r = parse_iperf3_udp_json(run.out.out);
    iperf3_notes(r, run);
    return r;
}

ProbeResult run_ping(const ProbeSpec& spec, const Endpoints& where, const Tick& tick) {
    std::string exe = sys::find_tool("ping");
    auto count = option_int(spec, "count");
    auto interval = std::chrono::nanoseconds(option_int(spec, "interval"));
    auto duration = std::chrono::nanoseconds(option_int(spec, "duration"));
    auto method = option_string(spec, "method");
    if (method != "icmp") throw InputError("rtt probe: tool \"ping\" measures ICMP only; set method = \"icmp\"");
    std::vector<std::string> argv{
        exe,  "-n", "-c", std::to_string(count),      "-i", seconds_arg(interval),
        "-W", "1",  "-w", seconds_arg(duration + 1s), "-s", std::to_string(option_int(spec, "size"))};
    if (!where.client.address.empty()) argv.insert(argv.end(), {"-I", where.client.address});
    argv.push_back(where.server.address);
    sys::Process ping(where.client.netns, argv);
    auto out = ping.wait(std::chrono::duration_cast<std::chrono::milliseconds>(duration) + 5s, tick);
    if (out.timed_out) throw Error("ping did not finish in time (killed)");
    if (out.out.find("packets transmitted") == std::string::npos)
        throw Error(fmt::format("ping {}: {}", sys::describe_status(out.status),
                                sys::tail_lines(out.err.empty() ? out.out : out.err)));
    auto r = parse_ping(out.out, seconds(interval));
    r.notes.push_back("command: " + fmt::format("{}", fmt::join(argv, " ")));
    return r;
}

ProbeResult run_hping3(const ProbeSpec& spec, const Endpoints& where, const Tick& tick) {
    if (option_string(spec, "method") != "tcp")
        throw InputError(
            "rtt probe: tool \"hping3\" measures the TCP handshake (hping3 -S) only; set method = \"tcp\"");
    if (family_of(where.server.address) == AF_INET6)
        throw InputError(
            "rtt probe: hping3 speaks IPv4 only; over IPv6 use tool = \"builtin\" (its method \"tcp\" times the "
            "same handshake)");
    check_remote(spec, where.server);
    std::string exe = sys::find_tool("hping3");
    auto interval = std::chrono::nanoseconds(option_int(spec, "interval"));
    auto duration = std::chrono::nanoseconds(option_int(spec, "duration"));
    // As the built-in probe: `count` probes, but none sent after `duration`.
    auto count = option_int(spec, "count");
    if (interval.count() > 0)
        count = std::min<std::int64_t>(count, (duration.count() + interval.count() - 1) / interval.count());
    count = std::max<std::int64_t>(count, 1);
    auto interval_us =
        std::max<std::int64_t>(1, std::chrono::duration_cast<std::chrono::microseconds>(interval).count());
    // The built-in tcp rtt server's socket (a remote target has its own listener): the kernel
    // answers each SYN, and the client's kernel (which has no socket for hping3's SYN) resets
    // the half-open connection.
    std::optional<Fd> listener;
    std::uint16_t port = where.server.port;
    if (!where.server.remote) {
        listener.emplace(listen_tcp(where.server.netns, where.server.address, where.server.port));
        port = local_port(listener->get());
    }
    std::vector<std::string> argv{exe,
                                  "-S",
                                  "-n",
                                  "-p",
                                  std::to_string(port),
                                  "-c",
                                  std::to_string(count),
                                  "-i",
                                  fmt::format("u{}", interval_us),
                                  where.server.address};
    sys::Process hping(where.client.netns, argv);
    auto bound = std::chrono::duration_cast<std::chrono::milliseconds>(interval * count) + 10s;
    auto out = hping.wait(bound, tick);
    if (out.timed_out) throw Error("hping3 did not finish in time (killed)");
    if (out.err.find("packets transmitted") == std::string::npos)
        throw Error(fmt::format("hping3 {}: {}", sys::describe_status(out.status),
                                sys::tail_lines(out.err.empty() ? out.out : out.err)));
    auto r = parse_hping3(out.out + out.err, seconds(interval));
    r.notes.push_back("command: " + fmt::format("{}", fmt::join(argv, " ")));
    if (count < option_int(spec, "count"))
        r.notes.push_back(
            fmt::format("sent {} of {} probes: `duration` ends the probe first", count, option_int(spec, "count")));
    return r;
}

}  // namespace wanlab::probes
