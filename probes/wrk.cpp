// wrk as the http probe's load generator: its text output parsed without a Lua script, and
// run_wrk(), which starts the built-in server the way run_http() does. See docs/probes.md.
#include <cmath>
#include <optional>
#include <regex>
#include <sstream>

#include <fmt/format.h>

#include "core/error.h"
#include "probes/external.h"
#include "probes/http.h"

namespace wanlab::probes {
namespace {

using namespace std::chrono_literals;

/// "136.54us", "1.21s", "2.00m" (wrk's format_time_us / format_time_s) -> seconds.
double wrk_seconds(const std::string& text) {
    static const std::regex kTime(R"(([\d.]+)(us|ms|s|m|h))");
    std::smatch m;
    if (!std::regex_match(text, m, kTime))
        throw Error(fmt::format("wrk printed a time \"{}\" it does not print", text));
    double v = std::stod(m[1]);
    const std::string unit = m[2];
    if (unit == "us") return v / 1e6;
    if (unit == "ms") return v / 1e3;
    if (unit == "s") return v;
    return unit == "m" ? v * 60 : v * 3600;
}

/// "150.29M", "612.42K", "0.00" (wrk's format_binary, without the "B" it appends) -> bytes.
double wrk_bytes(const std::string& text) {
    static const std::regex kBytes(R"(([\d.]+)([KMGTP]?))");
    std::smatch m;
    if (!std::regex_match(text, m, kBytes))
        throw Error(fmt::format("wrk printed a size \"{}B\" it does not print", text));
    static const std::string kPrefixes = "KMGTP";
    double scale = m[2].length() ? std::pow(1024.0, static_cast<double>(kPrefixes.find(m[2].str()) + 1)) : 1.0;
    return std::stod(m[1]) * scale;
}

/// The seconds of a whole-second duration option, for wrk's integer-seconds arguments.
std::int64_t whole_seconds(const ProbeSpec& spec, const char* option) {
    auto ns = option_int(spec, option);
    if (ns < 1'000'000'000 || ns % 1'000'000'000 != 0)
        throw InputError(fmt::format("http probe: tool \"wrk\" takes whole seconds; `{}` must be 1s, 2s, ...", option));
    return ns / 1'000'000'000;
}

/// What wrk cannot do, refused rather than measured differently.
void check_wrk_options(const ProbeSpec& spec) {
    if (option_int(spec, "rate") != 0)
        throw InputError(
            "http probe: tool \"wrk\" has no fixed rate (that is wrk2); set rate = 0 or use tool \"builtin\"");
    if (!option_bool(spec, "client_nodelay"))
        throw InputError("http probe: wrk always sets TCP_NODELAY; `client_nodelay = false` needs tool \"builtin\"");
    if (option_bool(spec, "client_quickack"))
        throw InputError(
            "http probe: wrk leaves quick-ack to the kernel; `client_quickack = true` needs tool \"builtin\"");
    auto connections = option_int(spec, "connections"), threads = option_int(spec, "threads");
    if (connections % threads != 0)
        throw InputError(
            fmt::format("http probe: wrk opens connections / threads per thread; `connections` ({}) must "
                        "be a multiple of `threads` ({})",
                        connections, threads));
}

struct WrkErrors {
    double connect = 0, read = 0, write = 0, timeout = 0, status = 0;
};

WrkErrors wrk_errors(const std::string& text) {
    // wrk prints each line only when its counts are not all zero.
    static const std::regex kSocket(R"(Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+))");
    static const std::regex kStatus(R"(Non-2xx or 3xx responses: (\d+))");
    WrkErrors e;
    std::smatch m;
    if (std::regex_search(text, m, kSocket))
        e = {std::stod(m[1]), std::stod(m[2]), std::stod(m[3]), std::stod(m[4]), 0};
    if (std::regex_search(text, m, kStatus)) e.status = std::stod(m[1]);
    return e;
}

/// The "Latency" row (mean, stdev, max) and the distribution lines (50/75/90/99%).
void wrk_latency(const std::string& text, ProbeResult& r) {
    static const std::regex kRow(R"(\n\s+Latency\s+(\S+)\s+(\S+)\s+(\S+))");
    static const std::regex kPercentile(R"(^\s+(\d+)%\s+(\S+)\s*$)");
    std::smatch m;
    if (!std::regex_search(text, m, kRow)) throw Error("wrk output has no \"Latency\" row");
    double mean = wrk_seconds(m[1]), max = wrk_seconds(m[3]);
    std::map<int, double> at;
    auto distribution = text.find("Latency Distribution");  // printed with --latency
    std::istringstream in(distribution == std::string::npos ? std::string() : text.substr(distribution));
    std::string line;
    while (std::getline(in, line))
        if (std::regex_match(line, m, kPercentile)) at[std::stoi(m[1])] = wrk_seconds(m[2]);
    if (mean == 0 && max == 0) {  // wrk's empty histogram: no request completed within --timeout
        r.notes.push_back("wrk recorded no latency (no answer within --timeout): latency metrics are NaN");
        for (const char* k : {"latency_mean", "latency_p50", "latency_p90", "latency_p99", "latency_max"})
            r.metrics[k] = std::nan("");
        return;
    }
    r.metrics["latency_mean"] = mean;
    r.metrics["latency_max"] = max;
    for (int p : {50, 90, 99})
        if (at.count(p)) r.metrics[fmt::format("latency_p{}", p)] = at[p];
    if (at.count(75)) r.notes.push_back(fmt::format("wrk: latency p75 {:.6f} s", at[75]));
}

}  // namespace

ProbeResult parse_wrk(const std::string& text) {
    static const std::regex kRequests(R"((\d+) requests in (\S+), (\S+)B read)");
    static const std::regex kRate(R"(Requests/sec:\s+([\d.]+))");
    static const std::regex kTransfer(R"(Transfer/sec:\s+(\S+)B)");
    ProbeResult r;
    r.kind = "http";
    r.tool = "wrk";
    std::smatch m;
    if (!std::regex_search(text, m, kRequests)) throw Error("wrk output has no \"N requests in T, S read\" line");
    auto& metrics = r.metrics;
    metrics["requests"] = std::stod(m[1]);
    if (!std::regex_search(text, m, kRate)) throw Error("wrk output has no \"Requests/sec:\" line");
    metrics["requests_per_second"] = std::stod(m[1]);
    if (std::regex_search(text, m, kTransfer)) metrics["throughput"] = wrk_bytes(m[1]) * 8;
    wrk_latency(text, r);
    auto e = wrk_errors(text);
    metrics["timeouts"] = e.timeout;
    metrics["non_2xx"] = e.status;
    metrics["errors"] = e.connect + e.read + e.write + e.timeout + e.status;
    r.notes.push_back(
        fmt::format("wrk: socket errors connect {}, read {}, write {}, timeout {}; {} answers with status "
                    ">= 400 (wrk's \"Non-2xx or 3xx\")",
                    e.connect, e.read, e.write, e.timeout, e.status));
    r.notes.push_back(
        "wrk: requests counts every answer, also those later than --timeout (counted as timeouts); its "
        "percentiles include samples its stats_correct() adds for answers slower than twice the mean "
        "interval per connection");
    return r;
}

ProbeResult run_wrk(const ProbeSpec& spec, const Endpoints& where, const Tick& tick) {
    check_wrk_options(spec);
    auto seconds = whole_seconds(spec, "duration");
    auto timeout = whole_seconds(spec, "timeout");
    std::string exe = sys::find_tool("wrk");
    http::Target target;
    http::start_target(target, spec, where);
    auto& options = target.options;  // set when the built-in server runs, here or far
    std::string url = options ? fmt::format("http://{}/", host_port(target.url.address, target.url.port))
                              : option_string(spec, "url");
    std::vector<std::string> argv{exe,         "--latency",
                                  "-t",        std::to_string(option_int(spec, "threads")),
                                  "-c",        std::to_string(option_int(spec, "connections")),
                                  "-d",        fmt::format("{}s", seconds),
                                  "--timeout", fmt::format("{}s", timeout),
                                  url};
    sys::Process wrk(where.client.netns, argv);
    auto out = wrk.wait(std::chrono::seconds(seconds + timeout) + 10s, target.watching(tick));
    auto answered = target.stop();
    if (out.timed_out) throw Error("wrk did not finish in time (killed)");
    if (!sys::exited_ok(out))
        throw Error(fmt::format("wrk {}: {}", sys::describe_status(out.status),
                                sys::tail_lines(out.err.empty() ? out.out : out.err)));
    auto r = parse_wrk(out.out);
    r.notes.push_back("command: " + fmt::format("{}", fmt::join(argv, " ")));
    if (options)
        r.notes.push_back(
            fmt::format("built-in server{}: {} B body{}, {} thread(s), TCP_NODELAY {}; it answered {} requests",
                        target.far ? " on the server machine" : "", options->response_size,
                        options->split_write ? " (headers and body in two writes)" : "", options->threads,
                        options->nodelay ? "on" : "off", answered.value_or(0)));
    return r;
}

}  // namespace wanlab::probes
