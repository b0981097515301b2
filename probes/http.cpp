// The http probe: the pure parts (URL, response parser, request scanner, pacer) and
// run_http(), which starts the built-in server (unless a url is given), runs the load
// generator and turns its tally into metrics. See docs/probes.md.
#include "probes/http.h"

#include <arpa/inet.h>
#include <sys/epoll.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>

#include <fmt/format.h>

#include "core/error.h"
#include "probes/sockets.h"

namespace wanlab::probes {
namespace http {
namespace {

constexpr std::size_t kMaxLine = 8 * 1024;  // a longer status, header or chunk-size line fails

char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() &&
           std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return lower(x) == lower(y); });
}

bool icontains(std::string_view haystack, std::string_view needle) {
    for (std::size_t i = 0; i + needle.size() <= haystack.size(); ++i)
        if (iequals(haystack.substr(i, needle.size()), needle)) return true;
    return false;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

/// A line from the network, safe to print: at most 60 characters, others as '?'.
std::string printable(std::string_view s) {
    std::string out;
    for (char c : s.substr(0, 60)) out += std::isprint(static_cast<unsigned char>(c)) ? c : '?';
    return s.size() > 60 ? out + "..." : out;
}

bool digits(std::string_view s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

Url parse_url(std::string_view text) {
    auto bad = [text](const std::string& why) { return InputError(fmt::format("url \"{}\": {}", text, why)); };
    if (text.size() >= 8 && iequals(text.substr(0, 8), "https://"))
        throw bad("https is not supported (the built-in load generator speaks plain HTTP/1.1)");
    if (text.size() < 7 || !iequals(text.substr(0, 7), "http://")) throw bad("expected http://ADDRESS[:PORT][/PATH]");
    std::string_view rest = text.substr(7);
    auto end = rest.find_first_of("/?#");
    std::string_view authority = rest.substr(0, end);
    Url url;
    if (end != std::string_view::npos) {
        std::string_view path = rest.substr(end);
        path = path.substr(0, path.find('#'));
        url.path = path.empty() || path.front() != '/' ? "/" + std::string(path) : std::string(path);
    }
    if (authority.find('@') != std::string_view::npos) throw bad("user names in the URL are not supported");
    std::string_view host = authority;
    std::string_view after;            // what follows the host: "" or ":PORT"
    if (authority.starts_with('[')) {  // RFC 3986: an IPv6 address in brackets
        auto close = authority.find(']');
        if (close == std::string_view::npos)
            throw bad("an IPv6 address in a URL ends with `]`, as in http://[2001:2::6]:8080/");
        host = authority.substr(1, close - 1);
        after = authority.substr(close + 1);
        if (!after.empty() && after.front() != ':') throw bad("expected `:PORT` after the `]`");
        in6_addr a6{};
        if (::inet_pton(AF_INET6, std::string(host).c_str(), &a6) != 1)
            throw bad("the address in brackets must be an IPv6 address such as 2001:2::6");
    } else {
        if (authority.find(':') != authority.rfind(':'))
            throw bad("an IPv6 address in a URL goes in brackets, as in http://[2001:2::6]:8080/");
        auto colon = authority.find(':');
        host = authority.substr(0, colon);
        if (colon != std::string_view::npos) after = authority.substr(colon);
        in_addr a{};
        if (host.empty() || ::inet_pton(AF_INET, std::string(host).c_str(), &a) != 1)
            throw bad(
                "the host must be an IPv4 address such as 198.18.0.6, or an IPv6 one in brackets (names are "
                "not resolved)");
    }
    if (!after.empty()) {
        std::string_view port = after.substr(1);
        int v = 0;
        if (!digits(port) || port.size() > 5 || (v = std::stoi(std::string(port))) < 1 || v > 65535)
            throw bad("the port must be 1-65535");
        url.port = static_cast<std::uint16_t>(v);
    }
    url.address = std::string(host);
    return url;
}

std::string url_host(const std::string& address) {
    return address.find(':') != std::string::npos ? fmt::format("[{}]", address) : address;
}

std::string to_string(const Url& url) { return fmt::format("http://{}{}", host_port(url.address, url.port), url.path); }

std::string request_for(const Url& url) {
    std::string host = url.port == 80 ? url_host(url.address) : host_port(url.address, url.port);
    return fmt::format("GET {} HTTP/1.1\r\nHost: {}\r\n\r\n", url.path, host);
}

std::string response_headers(std::size_t body_bytes) {
    return fmt::format(
        "HTTP/1.1 200 OK\r\nServer: wanlab\r\nContent-Type: application/octet-stream\r\n"
        "Content-Length: {}\r\n\r\n",
        body_bytes);
}

// --- ResponseParser -------------------------------------------------------------------

std::size_t ResponseParser::feed(std::string_view data) {
    std::size_t pos = 0;
    while (pos < data.size() && state_ == State::incomplete) {
        std::string_view rest = data.substr(pos);
        if (part_ == Part::body_length || part_ == Part::chunk_data) {
            auto take = std::min<std::uint64_t>(remaining_, rest.size());
            remaining_ -= take;
            body_bytes_ += take;
            pos += static_cast<std::size_t>(take);
            if (remaining_ == 0 && part_ == Part::body_length) finish();
            if (remaining_ == 0 && part_ == Part::chunk_data) part_ = Part::chunk_end;
        } else if (part_ == Part::body_to_eof) {
            body_bytes_ += rest.size();
            pos += rest.size();
        } else {
            pos += feed_line(rest);
        }
    }
    total_bytes_ += pos;
    return pos;
}

std::size_t ResponseParser::feed_line(std::string_view rest) {
    auto nl = rest.find('\n');
    std::size_t used = nl == std::string_view::npos ? rest.size() : nl + 1;
    if (line_.size() + used > kMaxLine) {
        fail("a status, header or chunk-size line longer than 8 KiB");
        return used;
    }
    if (nl == std::string_view::npos) {
        line_.append(rest);  // the line continues in the next read
        return used;
    }
    std::string_view line = rest.substr(0, nl);
    if (!line_.empty()) {
        line_.append(line);
        line = line_;
    }
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    on_line(line);
    line_.clear();
    return used;
}

void ResponseParser::on_line(std::string_view line) {
    switch (part_) {
        case Part::status_line:
            if (!line.empty()) on_status_line(line);  // blank lines before a response are allowed
            break;
        case Part::headers:
            if (line.empty())
                on_headers_end();
            else
                on_header(line);
            break;
        case Part::chunk_size: on_chunk_size(line); break;
        case Part::chunk_end:
            if (!line.empty()) return fail("chunk data longer than its size");
            part_ = Part::chunk_size;
            break;
        case Part::trailers:
            if (line.empty()) finish();
            break;
        default: break;
    }
}

void ResponseParser::on_status_line(std::string_view line) {
    // "HTTP/1.1 200 OK"; the reason phrase may be empty or missing.
    bool ok = line.size() >= 12 && line.starts_with("HTTP/1.") && (line[7] == '0' || line[7] == '1') &&
              line[8] == ' ' && digits(line.substr(9, 3)) && (line.size() == 12 || line[12] == ' ');
    if (!ok) return fail("bad status line: \"" + printable(line) + "\"");
    http10_ = line[7] == '0';
    keep_alive_ = !http10_;
    status_ = (line[9] - '0') * 100 + (line[10] - '0') * 10 + (line[11] - '0');
    part_ = Part::headers;
}

void ResponseParser::on_header(std::string_view line) {
    auto colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) return fail("bad header line: \"" + printable(line) + "\"");
    std::string_view name = line.substr(0, colon), value = trim(line.substr(colon + 1));
    if (iequals(name, "content-length")) {
        std::uint64_t v = 0;
        auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
        if (value.empty() || ec != std::errc() || end != value.data() + value.size() || (has_length_ && v != length_))
            return fail("bad Content-Length: \"" + printable(value) + "\"");
        has_length_ = true;
        length_ = v;
    } else if (iequals(name, "transfer-encoding")) {
        chunked_ = chunked_ || icontains(value, "chunked");
    } else if (iequals(name, "connection")) {
        if (icontains(value, "close"))
            keep_alive_ = false;
        else if (icontains(value, "keep-alive"))
            keep_alive_ = true;
    }
}

void ResponseParser::on_headers_end() {
    if (status_ >= 100 && status_ < 200) {  // interim (100 Continue): the real response follows
        status_ = 0;
        has_length_ = chunked_ = false;
        length_ = 0;
        part_ = Part::status_line;
        return;
    }
    if (status_ == 204 || status_ == 304) return finish();
    if (chunked_) {  // chunked wins over a Content-Length (RFC 9112 6.3)
        part_ = Part::chunk_size;
    } else if (has_length_) {
        remaining_ = length_;
        part_ = Part::body_length;
        if (length_ == 0) finish();
    } else {  // the body runs until the server closes
        keep_alive_ = false;
        part_ = Part::body_to_eof;
    }
}

void ResponseParser::on_chunk_size(std::string_view line) {
    std::string_view hex = trim(line.substr(0, line.find(';')));
    std::uint64_t size = 0;
    auto [end, ec] = std::from_chars(hex.data(), hex.data() + hex.size(), size, 16);
    if (hex.empty() || ec != std::errc() || end != hex.data() + hex.size())
        return fail("bad chunk size: \"" + printable(line) + "\"");
    remaining_ = size;
    part_ = size == 0 ? Part::trailers : Part::chunk_data;
}

void ResponseParser::eof() {
    if (state_ != State::incomplete) return;
    if (part_ == Part::body_to_eof) return finish();
    fail("the connection closed before the response ended");
}

void ResponseParser::reset() {
    state_ = State::incomplete;
    part_ = Part::status_line;
    line_.clear();  // keeps its capacity
    status_ = 0;
    http10_ = chunked_ = has_length_ = false;
    keep_alive_ = true;
    length_ = remaining_ = body_bytes_ = total_bytes_ = 0;
    error_.clear();
}

void ResponseParser::fail(std::string why) {
    state_ = State::failed;
    error_ = std::move(why);
}

void ResponseParser::finish() { state_ = State::complete; }

// --- RequestScanner, Pacer --------------------------------------------------------------

std::size_t RequestScanner::scan(std::string_view data) {
    static constexpr char kEnd[] = "\r\n\r\n";
    std::size_t n = 0;
    for (char c : data) {
        if (c == kEnd[matched_]) {
            if (++matched_ < 4) continue;
            ++n;
            matched_ = 0;
        } else {
            matched_ = c == '\r' ? 1 : 0;
        }
    }
    return n;
}

Pacer::Pacer(double requests_per_second, std::size_t connections, std::size_t index, Clock::time_point start)
    : start_(start) {
    if (requests_per_second > 0) {
        interval_ns_ = static_cast<double>(connections) * 1e9 / requests_per_second;
        offset_ns_ = static_cast<double>(index) * 1e9 / requests_per_second;
    }
}

Clock::time_point Pacer::slot(std::uint64_t k) const {
    std::chrono::duration<double, std::nano> at(offset_ns_ + static_cast<double>(k) * interval_ns_);
    return start_ + std::chrono::duration_cast<Clock::duration>(at);
}

Clock::time_point Pacer::due(Clock::time_point now) const { return closed_loop() ? now : slot(k_); }

Clock::time_point Pacer::take(Clock::time_point now) { return closed_loop() ? now : slot(k_++); }

Fd epoll_instance() {
    Fd fd(::epoll_create1(EPOLL_CLOEXEC));
    if (!fd) sys::fail_errno("creating an epoll instance");
    return fd;
}

void epoll_set(int epoll, int op, int fd, std::uint32_t events, std::uint64_t tag) {
    epoll_event e{};
    e.events = events;
    e.data.u64 = tag;
    if (::epoll_ctl(epoll, op, fd, &e) != 0) sys::fail_errno(fmt::format("epoll_ctl on socket {}", fd));
}

void LoadTally::merge(const LoadTally& o) {
    latency.merge(o.latency);
    samples.insert(samples.end(), o.samples.begin(), o.samples.end());
    requests += o.requests;
    non_2xx += o.non_2xx;
    timeouts += o.timeouts;
    socket_errors += o.socket_errors;
    response_bytes += o.response_bytes;
    reconnects += o.reconnects;
    elapsed = std::max(elapsed, o.elapsed);
    intervals.merge(o.intervals);
}

}  // namespace http

http::ServerOptions http::server_options(const ProbeSpec& spec) {
    constexpr std::int64_t kMaxResponse = 64 * 1024 * 1024;
    auto size = option_int(spec, "response_size");
    if (size < 0 || size > kMaxResponse) throw InputError("http probe: `response_size` must be 0 to 64MiB");
    ServerOptions s;
    s.response_size = static_cast<std::size_t>(size);
    s.nodelay = option_bool(spec, "server_nodelay");
    s.quickack = option_bool(spec, "server_quickack");
    s.split_write = option_bool(spec, "server_split_write");
    s.threads = static_cast<int>(option_int(spec, "server_threads"));
    return s;
}

// --- the probe ----------------------------------------------------------------------------

namespace {

constexpr std::size_t kMaxKeptRequestLatencies = 4'000'000;  // raw latencies kept; the histogram sees all

http::LoadOptions load_options(const ProbeSpec& spec) {
    http::LoadOptions o;
    o.connections = static_cast<std::size_t>(option_int(spec, "connections"));
    o.threads = static_cast<int>(std::min<std::int64_t>(option_int(spec, "threads"), option_int(spec, "connections")));
    o.requests_per_second = static_cast<double>(option_int(spec, "rate"));
    o.duration = std::chrono::nanoseconds(option_int(spec, "duration"));
    o.timeout = std::chrono::nanoseconds(option_int(spec, "timeout"));
    if (o.timeout <= std::chrono::nanoseconds::zero()) throw InputError("http probe: `timeout` must be above zero");
    o.nodelay = option_bool(spec, "client_nodelay");
    o.quickack = option_bool(spec, "client_quickack");
    o.keep_samples = kMaxKeptRequestLatencies;
    o.interval = std::chrono::nanoseconds(option_int(spec, "interval"));
    return o;
}

double nan_if_empty(const stats::Histogram& h, double v) { return h.count() ? v : std::nan(""); }

void summarize(ProbeResult& r, http::LoadTally& t) {
    const auto& h = t.latency;
    auto& m = r.metrics;
    m["requests"] = static_cast<double>(t.requests);
    m["requests_per_second"] = t.elapsed > 0 ? static_cast<double>(t.requests) / t.elapsed : 0;
    m["latency_mean"] = nan_if_empty(h, h.mean() / 1e9);
    m["latency_p50"] = nan_if_empty(h, static_cast<double>(h.percentile(50)) / 1e9);
    m["latency_p90"] = nan_if_empty(h, static_cast<double>(h.percentile(90)) / 1e9);
    m["latency_p99"] = nan_if_empty(h, static_cast<double>(h.percentile(99)) / 1e9);
    m["latency_p999"] = nan_if_empty(h, static_cast<double>(h.percentile(99.9)) / 1e9);
    m["latency_max"] = nan_if_empty(h, static_cast<double>(h.max()) / 1e9);
    m["errors"] = static_cast<double>(t.timeouts + t.non_2xx + t.socket_errors);
    m["timeouts"] = static_cast<double>(t.timeouts);
    m["non_2xx"] = static_cast<double>(t.non_2xx);
    m["throughput"] = t.elapsed > 0 ? static_cast<double>(t.response_bytes) * 8 / t.elapsed : 0;
    r.samples["latency"] = std::move(t.samples);
    t.intervals.add_series(r.series, "requests_per_second", t.elapsed);
}

std::string on_off(bool v) { return v ? "on" : "off"; }

void describe(ProbeResult& r, const http::LoadOptions& o, const std::optional<http::ServerOptions>& s,
              const http::LoadTally& t) {
    if (o.requests_per_second > 0)
        r.notes.push_back(
            fmt::format("fixed rate {:.0f} requests/s: latency counts from each request's intended send "
                        "time (no coordinated omission)",
                        o.requests_per_second));
    else
        r.notes.push_back("closed loop: each connection sends its next request when the answer is in");
    r.notes.push_back(fmt::format("{} connections on {} thread(s) to {}; client TCP_NODELAY {}, TCP_QUICKACK {}",
                                  o.connections, o.threads, to_string(o.url), on_off(o.nodelay),
                                  o.quickack ? "after each read" : "kernel default"));
    if (o.quickack) r.notes.push_back(kClientQuickackNote);
    if (s)
        r.notes.push_back(
            fmt::format("built-in server: {} B body{}, {} thread(s), TCP_NODELAY {}, TCP_QUICKACK {}", s->response_size,
                        s->split_write && s->response_size ? " (headers and body in two writes)" : "", s->threads,
                        on_off(s->nodelay), s->quickack ? "after each read" : "kernel default"));
    r.notes.push_back(
        fmt::format("latency percentiles from a histogram (0.8% resolution); {} socket errors, {} reconnects",
                    t.socket_errors, t.reconnects));
    if (t.samples.size() < t.requests)
        r.notes.push_back(
            fmt::format("samples.latency holds the first {} of {} latencies", t.samples.size(), t.requests));
}

}  // namespace

void http::start_target(Target& target, const ProbeSpec& spec, const Endpoints& where) {
    check_remote(spec, where.server);
    std::string url = option_string(spec, "url");
    if (!url.empty()) {
        target.url = parse_url(url);
        return;
    }
    if (where.server.address.empty()) throw InputError("http probe: the built-in server needs an address");
    target.options = server_options(spec);
    if (where.server.far) {  // it runs on another machine, started there for this probe
        target.far = where.server.far;
        target.url = Url{where.server.address, where.server.port, "/"};
        return;
    }
    target.server.emplace(where.server, *target.options);
    target.url = Url{where.server.address, target.server->port(), "/"};
}

Tick http::Target::watching(const Tick& tick) {
    HttpServer* serving = server ? &*server : nullptr;
    return [tick, serving] {
        if (tick) tick();
        if (serving && serving->failed()) serving->stop_and_join();  // rethrows the server's error
    };
}

std::optional<std::uint64_t> http::Target::stop() {
    if (server) {
        server->stop_and_join();
        return server->requests();
    }
    if (far) return far->stop().requests;
    return std::nullopt;
}

namespace {

/// The far half of the http probe (serve_far()): the built-in server.
class HttpFarServer final : public FarServer {
public:
    HttpFarServer(const ProbeSpec& spec, const Endpoint& at) : server_(at, http::server_options(spec)) {}
    std::uint16_t port() const override { return server_.port(); }
    FarReport stop() override {
        if (!report_) {
            server_.stop_and_join();
            report_.emplace();
            report_->requests = server_.requests();
        }
        return *report_;
    }

private:
    http::HttpServer server_;
    std::optional<FarReport> report_;
};

}  // namespace

std::unique_ptr<FarServer> serve_http(const ProbeSpec& spec, const Endpoint& at) {
    return std::make_unique<HttpFarServer>(spec, at);
}

ProbeResult run_http(const ProbeSpec& spec, const Endpoints& where, const Tick& tick) {
    http::LoadOptions load = load_options(spec);
    http::Target target;
    http::start_target(target, spec, where);
    load.url = target.url;
    http::LoadTally tally = http::run_load(where.client, load, target.watching(tick));
    auto answered = target.stop();

    ProbeResult r;
    r.kind = "http";
    r.tool = "builtin";
    describe(r, load, target.options, tally);
    summarize(r, tally);
    if (!target.options) r.notes.push_back("url given: no built-in server, the server_* options do not apply");
    if (target.far)
        r.notes.push_back(
            fmt::format("server: wanlab's built-in server on the server machine ({}); it answered {} "
                        "requests",
                        host_port(target.url.address, target.url.port), answered.value_or(0)));
    return r;
}

}  // namespace wanlab::probes
