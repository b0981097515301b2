// The http probe's parts: an HTTP/1.1 keep-alive load generator and a built-in server, both
// one epoll loop per thread over non-blocking sockets, and the pure pieces they are built from
// (URL, response parser, request scanner, request pacer), which the unit tests drive directly.
//
// Contract: parse_url, ResponseParser, RequestScanner and Pacer are pure and allocation-light
// (a parser keeps at most one header line). HttpServer and run_load open their sockets in the
// endpoint's namespace, join every thread they start before they return or are destroyed, and
// throw wanlab::Error naming what was attempted. Latencies are nanoseconds in the histograms,
// seconds elsewhere. ResponseParser, RequestScanner and Pacer are not thread-safe (one per
// connection); HttpServer may be stopped from the thread that owns it while it serves.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "probes/probe.h"
#include "probes/sockets.h"
#include "probes/stats.h"

namespace wanlab::probes::http {

/// http://ADDRESS[:PORT][/PATH] with an IPv4 address, or an IPv6 one in brackets.
struct Url {
    std::string address;
    std::uint16_t port = 80;
    std::string path = "/";
};

/// Parses `text`; throws InputError saying what is wrong ("https is not supported", "the host
/// must be an IPv4 address or an IPv6 one in brackets").
Url parse_url(std::string_view text);

/// An address as a URL's host: IPv6 in brackets ("[2001:2::6]"), IPv4 as it is.
std::string url_host(const std::string& address);
/// `url` written out: "http://[2001:2::6]:8080/path".
std::string to_string(const Url& url);

/// The request the load generator sends for `url`, the same every time (as wrk does).
std::string request_for(const Url& url);

/// ResponseParser: one HTTP/1.x response at a time, fed in pieces as they arrive.
/// Understands the status line, Content-Length, Transfer-Encoding: chunked, Connection
/// (keep-alive by default for HTTP/1.1, close for 1.0), bodies that end at EOF, and skips 1xx
/// interim responses. Body bytes are counted, never copied.
class ResponseParser {
public:
    enum class State { incomplete, complete, failed };

    /// Consumes bytes of the current response; returns how many it used. It stops at the end
    /// of the response, so a return below data.size() with state() == complete means the
    /// peer sent more than was asked for.
    std::size_t feed(std::string_view data);
    /// The peer closed: completes a body that runs to EOF, fails anything else unfinished.
    void eof();
    /// Ready for the next response on the same connection.
    void reset();

    State state() const { return state_; }
    int status() const { return status_; }
    /// After complete: may the connection carry another request?
    bool keep_alive() const { return keep_alive_; }
    std::uint64_t body_bytes() const { return body_bytes_; }
    /// Every byte of the response (status line, headers, chunk framing, body).
    std::uint64_t total_bytes() const { return total_bytes_; }
    /// Why it failed ("bad status line: ...").
    const std::string& error() const { return error_; }

private:
    enum class Part { status_line, headers, body_length, body_to_eof, chunk_size, chunk_data, chunk_end, trailers };

    std::size_t feed_line(std::string_view data);  // one line, or the start of one
    void on_line(std::string_view line);
    void on_status_line(std::string_view line);
    void on_header(std::string_view line);
    void on_headers_end();
    void on_chunk_size(std::string_view line);
    void fail(std::string why);
    void finish();

    State state_ = State::incomplete;
    Part part_ = Part::status_line;
    std::string line_;  // a header line split across reads
    int status_ = 0;
    bool http10_ = false, keep_alive_ = true, chunked_ = false, has_length_ = false;
    std::uint64_t length_ = 0, remaining_ = 0, body_bytes_ = 0, total_bytes_ = 0;
    std::string error_;
};

/// RequestScanner: counts the ends of requests ("\r\n\r\n") in a byte stream that may split
/// anywhere. The built-in server answers requests without bodies (GET, as load generators send).
class RequestScanner {
public:
    /// How many requests ended in `data`.
    std::size_t scan(std::string_view data);

private:
    int matched_ = 0;  // bytes of "\r\n\r\n" seen so far
};

/// Pacer: when one connection sends its requests. Closed loop (rate 0): each request goes out
/// when the previous answer is in, and its latency counts from the send. Fixed rate: the whole
/// probe sends `requests_per_second`, connection `index` of `connections` at
/// start + (index + k * connections) / rate for its k-th request, so the sends are spread
/// evenly; a request sent late (its connection still waited for the previous answer) counts
/// its latency from that intended time, not from when it went out (no coordinated omission).
class Pacer {
public:
    Pacer() = default;  ///< closed loop
    Pacer(double requests_per_second, std::size_t connections, std::size_t index, Clock::time_point start);

    bool closed_loop() const { return interval_ns_ <= 0; }
    /// When the next request is meant to go out; in a closed loop, `now` (at once).
    Clock::time_point due(Clock::time_point now) const;
    /// A request goes out at `now`: the time its latency counts from. Moves to the next slot.
    Clock::time_point take(Clock::time_point now);

private:
    Clock::time_point slot(std::uint64_t k) const;

    Clock::time_point start_{};
    double interval_ns_ = 0, offset_ns_ = 0;
    std::uint64_t k_ = 0;
};

/// What the built-in server answers and how it writes.
struct ServerOptions {
    std::size_t response_size = 1024;  ///< body bytes
    bool nodelay = true;               ///< TCP_NODELAY on every accepted connection
    bool quickack = false;             ///< TCP_QUICKACK after every read
    bool split_write = false;          ///< headers and body in two send()s
    int threads = 1;
};

/// The built-in server's options from an http probe's spec (response_size checked: 0 to
/// 64 MiB); the built-in load generator and wrk serve from the same server.
ServerOptions server_options(const ProbeSpec& spec);

/// The response headers for a body of `body_bytes` ("HTTP/1.1 200 OK ... Content-Length").
std::string response_headers(std::size_t body_bytes);

struct ServerShared;  // http_server.cpp: the response bytes and counters the threads share

/// HttpServer: the built-in server, answering every request with 200 and response_size bytes.
/// Creates: a listening socket in `at.netns` on at.address:at.port and `threads` threads, each
/// an epoll loop accepting and serving connections. Undoes: stops the threads (within 20 ms),
/// joins them and closes every socket. The destructor never throws.
class HttpServer {
public:
    HttpServer(const Endpoint& at, const ServerOptions& options);
    ~HttpServer();
    HttpServer(const HttpServer&) = delete;
    HttpServer& operator=(const HttpServer&) = delete;

    std::uint16_t port() const { return port_; }
    /// True once a thread failed (stop_and_join() rethrows its error).
    bool failed() const;
    /// Stops and joins the threads; rethrows the first error one of them threw.
    void stop_and_join();
    /// Requests answered so far (summed over threads after stop_and_join()).
    std::uint64_t requests() const;

private:
    std::unique_ptr<ServerShared> shared_;  // outlives the threads
    Fd listener_;
    std::uint16_t port_ = 0;
    std::unique_ptr<Workers> workers_;  // last: joined before the listener closes
};

/// What an http probe loads: the user's url, or else the built-in server it starts at
/// where.server (both the built-in load generator and wrk go through this).
struct Target {
    Url url;
    std::optional<ServerOptions> options;  ///< set when the built-in server runs, here or far
    std::optional<HttpServer> server;      ///< the built-in server here
    std::shared_ptr<FarServer> far;        ///< the built-in server on another machine
    /// `tick`, which also stops with the server's error once a server thread failed.
    Tick watching(const Tick& tick);
    /// Stops the built-in server, here or far (rethrowing its failure); the requests it
    /// answered, none without one.
    std::optional<std::uint64_t> stop();
};
/// Starts the built-in server unless the spec has a url (checked as the load generator
/// parses it); throws InputError when the server has no address to listen on, or is remote
/// and the spec has no url.
void start_target(Target& target, const ProbeSpec& spec, const Endpoints& where);

/// How the load generator loads.
struct LoadOptions {
    Url url;
    std::size_t connections = 10;
    int threads = 1;
    double requests_per_second = 0;  ///< 0 = closed loop
    std::chrono::nanoseconds duration{std::chrono::seconds(10)};
    std::chrono::nanoseconds timeout{std::chrono::seconds(2)};
    bool nodelay = true;                   ///< TCP_NODELAY on every connection
    bool quickack = false;                 ///< TCP_QUICKACK after every read
    std::size_t keep_samples = 1'000'000;  ///< raw latencies kept in total (the histogram sees all)
    std::chrono::nanoseconds interval{std::chrono::seconds(1)};  ///< of the time series
};

/// What the load generator saw, summed over its threads.
struct LoadTally {
    stats::Histogram latency;                                    ///< nanoseconds, one per completed request
    std::vector<double> samples;                                 ///< seconds, the first keep_samples latencies
    std::uint64_t requests = 0;                                  ///< completed in the window, any status
    std::uint64_t non_2xx = 0, timeouts = 0, socket_errors = 0;  ///< socket: connect, reset, EOF, bad answer
    std::uint64_t response_bytes = 0;                            ///< every byte of the completed responses
    std::uint64_t reconnects = 0;  ///< connections reopened (after an error or a server's close)
    double elapsed = 0;            ///< seconds measured
    IntervalTally intervals;       ///< completed requests and their latency per interval

    void merge(const LoadTally& other);
};

/// Opens `connections` connections from `client.netns` (bound to client.address if set) to
/// options.url, then loads them from `threads` epoll loops for `duration`. Throws if a
/// connection cannot be opened at the start; failures later count in the tally. `tick` is
/// called from this thread every 100 ms and may throw to abort.
LoadTally run_load(const Endpoint& client, const LoadOptions& options, const Tick& tick);

// Shared by the server and the client loops.
/// A new epoll instance (close-on-exec).
Fd epoll_instance();
/// epoll_ctl(op) for `fd` with `events`, reporting `tag` in epoll_event.data.u64.
void epoll_set(int epoll, int op, int fd, std::uint32_t events, std::uint64_t tag);

}  // namespace wanlab::probes::http
