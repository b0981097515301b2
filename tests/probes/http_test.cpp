// The http probe: the response parser fed in every split, the request scanner, the pacer
// (closed loop and fixed rate, latency from the intended send time), URLs, the kind's option
// checks; then the load generator and built-in server on loopback in the test's own
// namespace (no root), including a fake server that answers 404 or not at all.
#include <catch2/catch.hpp>

#include <sys/socket.h>

#include <cmath>
#include <string>

#include "core/config.h"
#include "core/error.h"
#include "probes/http.h"
#include "probes/probe.h"

using namespace wanlab;
using namespace wanlab::probes;
using namespace std::chrono_literals;
using http::ResponseParser;

namespace {

using State = ResponseParser::State;

/// Feeds `text` in pieces of `step` bytes; returns the bytes consumed in total.
std::size_t feed_in_pieces(ResponseParser& p, std::string_view text, std::size_t step) {
    std::size_t used = 0;
    for (std::size_t i = 0; i < text.size() && p.state() == State::incomplete; i += step) {
        auto piece = text.substr(i, step);
        auto n = p.feed(piece);
        used += n;
        if (n < piece.size()) break;
    }
    return used;
}

const std::string kLengthResponse =
    "HTTP/1.1 200 OK\r\nServer: x\r\nContent-Length: 10\r\nContent-Type: text/plain\r\n\r\n0123456789";
const std::string kChunkedResponse =
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    "4;name=value\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nExpires: never\r\n\r\n";

ProbeSpec spec_from(const std::string& text, std::string* errors = nullptr) {
    config::Documents docs;
    Diagnostics diag;
    const auto* table = docs.parse("test.toml", "[[probe]]\nkind = \"http\"\n" + text, diag);
    REQUIRE(table);
    auto root = config::from_toml(*table);
    auto spec = parse_probe(root.find("probe")->items.at(0), 0, std::chrono::milliseconds(500), diag);
    if (errors)
        *errors = diag.render(docs.sources());
    else {
        INFO(diag.render(docs.sources()));
        REQUIRE(!diag.has_errors());
    }
    return spec;
}

}  // namespace

// --- ResponseParser -------------------------------------------------------------------

TEST_CASE("http parser reads a Content-Length response whole and in pieces of every size", "[http][probes]") {
    for (std::size_t step = 1; step <= kLengthResponse.size(); ++step) {
        INFO("pieces of " << step);
        ResponseParser p;
        CHECK(feed_in_pieces(p, kLengthResponse, step) == kLengthResponse.size());
        REQUIRE(p.state() == State::complete);
        CHECK(p.status() == 200);
        CHECK(p.body_bytes() == 10);
        CHECK(p.total_bytes() == kLengthResponse.size());
        CHECK(p.keep_alive());
    }
}

TEST_CASE("http parser waits for the rest of a partial response", "[http][probes]") {
    ResponseParser p;
    CHECK(p.feed(kLengthResponse.substr(0, 20)) == 20);
    CHECK(p.state() == State::incomplete);
    CHECK(p.feed(kLengthResponse.substr(20, kLengthResponse.size() - 21)) == kLengthResponse.size() - 21);
    CHECK(p.state() == State::incomplete);  // one body byte missing
    CHECK(p.body_bytes() == 9);
    CHECK(p.feed(kLengthResponse.substr(kLengthResponse.size() - 1)) == 1);
    CHECK(p.state() == State::complete);
}

TEST_CASE("http parser reads a chunked body with extensions and trailers in any split", "[http][probes]") {
    for (std::size_t step = 1; step <= kChunkedResponse.size(); ++step) {
        INFO("pieces of " << step);
        ResponseParser p;
        CHECK(feed_in_pieces(p, kChunkedResponse, step) == kChunkedResponse.size());
        REQUIRE(p.state() == State::complete);
        CHECK(p.body_bytes() == 23);  // "Wikipedia in\r\n\r\nchunks."
        CHECK(p.keep_alive());
    }
}

TEST_CASE("http parser stops at the end of a response and leaves what follows", "[http][probes]") {
    ResponseParser p;
    std::string two = kLengthResponse + kLengthResponse;
    CHECK(p.feed(two) == kLengthResponse.size());
    CHECK(p.state() == State::complete);
    p.reset();  // the next response on the same keep-alive connection
    CHECK(p.feed(std::string_view(two).substr(kLengthResponse.size())) == kLengthResponse.size());
    CHECK(p.state() == State::complete);
    CHECK(p.total_bytes() == kLengthResponse.size());
}

TEST_CASE("http parser keeps HTTP/1.1 alive and closes HTTP/1.0 unless the Connection header says otherwise",
          "[http][probes]") {
    auto keep_alive = [](const std::string& text) {
        ResponseParser p;
        p.feed(text);
        REQUIRE(p.state() == State::complete);
        return p.keep_alive();
    };
    CHECK(keep_alive("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"));
    CHECK_FALSE(keep_alive("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"));
    CHECK_FALSE(keep_alive("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n"));
    CHECK(keep_alive("HTTP/1.0 200 OK\r\nconnection: Keep-Alive\r\ncontent-length: 0\r\n\r\n"));
}

TEST_CASE("http parser reads a body without length until the connection closes", "[http][probes]") {
    ResponseParser p;
    p.feed("HTTP/1.1 200 OK\r\n\r\nsome body");
    CHECK(p.state() == State::incomplete);
    p.eof();
    CHECK(p.state() == State::complete);
    CHECK(p.body_bytes() == 9);
    CHECK_FALSE(p.keep_alive());
}

TEST_CASE("http parser fails a response cut short by the peer", "[http][probes]") {
    ResponseParser p;
    p.feed(kLengthResponse.substr(0, kLengthResponse.size() - 3));
    p.eof();
    CHECK(p.state() == State::failed);
    CHECK(p.error() == "the connection closed before the response ended");
}

TEST_CASE("http parser skips 100 Continue and reads 204 and 304 without a body", "[http][probes]") {
    ResponseParser p;
    p.feed("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\nContent-Length: 3\r\n\r\nno!");
    CHECK(p.state() == State::complete);
    CHECK(p.status() == 404);
    CHECK(p.body_bytes() == 3);
    for (const char* status : {"204 No Content", "304 Not Modified"}) {
        ResponseParser q;
        std::string text = std::string("HTTP/1.1 ") + status + "\r\nContent-Length: 99\r\n\r\n";
        CHECK(q.feed(text) == text.size());
        CHECK(q.state() == State::complete);
        CHECK(q.body_bytes() == 0);
    }
}

TEST_CASE("http parser names what is wrong with a malformed response", "[http][probes]") {
    auto error_of = [](const std::string& text) {
        ResponseParser p;
        p.feed(text);
        CHECK(p.state() == State::failed);
        return p.error();
    };
    CHECK(error_of("SSH-2.0-OpenSSH_9.2\r\n") == "bad status line: \"SSH-2.0-OpenSSH_9.2\"");
    CHECK(error_of("HTTP/1.1 2x0 OK\r\n") == "bad status line: \"HTTP/1.1 2x0 OK\"");
    CHECK(error_of("HTTP/1.1 200 OK\r\nContent-Length: 12a\r\n") == "bad Content-Length: \"12a\"");
    CHECK(error_of("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n") == "bad Content-Length: \"2\"");
    CHECK(error_of("HTTP/1.1 200 OK\r\nno colon\r\n") == "bad header line: \"no colon\"");
    CHECK(error_of("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n") == "bad chunk size: \"zz\"");
    CHECK(error_of("HTTP/1.1 200 OK\r\nX: " + std::string(9000, 'a')) ==
          "a status, header or chunk-size line longer than 8 KiB");
}

// --- RequestScanner, Pacer ----------------------------------------------------------------

TEST_CASE("http request scanner counts requests split anywhere and pipelined", "[http][probes]") {
    std::string req = "GET / HTTP/1.1\r\nHost: a\r\n\r\n";
    std::string stream = req + req + req;
    for (std::size_t step = 1; step <= stream.size(); ++step) {
        http::RequestScanner s;
        std::size_t n = 0;
        for (std::size_t i = 0; i < stream.size(); i += step) n += s.scan(std::string_view(stream).substr(i, step));
        INFO("pieces of " << step);
        CHECK(n == 3);
    }
    http::RequestScanner s;
    CHECK(s.scan("GET / HTTP/1.1\r\r\n\r\n") == 1);  // a stray CR before the end
    CHECK(s.scan("\r\n\r") == 0);
}

TEST_CASE("http pacer in a closed loop sends at once and counts latency from the send", "[http][probes]") {
    http::Pacer p(0, 10, 3, Clock::time_point{});
    auto now = Clock::time_point{} + 5s;
    CHECK(p.closed_loop());
    CHECK(p.due(now) == now);
    CHECK(p.take(now) == now);
    CHECK(p.take(now + 1s) == now + 1s);
}

TEST_CASE("http pacer at a fixed rate spreads the connections' slots evenly", "[http][probes]") {
    auto start = Clock::time_point{} + 100s;
    // 1000 requests/s over 4 connections: every connection every 4 ms, offset by 1 ms each.
    std::vector<Clock::time_point> sends;
    for (std::size_t c = 0; c < 4; ++c) {
        http::Pacer p(1000, 4, c, start);
        CHECK_FALSE(p.closed_loop());
        for (int k = 0; k < 3; ++k) sends.push_back(p.take(p.due(start)));
    }
    std::sort(sends.begin(), sends.end());
    for (std::size_t i = 0; i < sends.size(); ++i) CHECK(sends[i] == start + std::chrono::milliseconds(i));
}

TEST_CASE("http pacer counts a late request's latency from its intended time (no coordinated omission)",
          "[http][probes]") {
    auto start = Clock::time_point{} + 100s;
    http::Pacer p(100, 1, 0, start);  // one connection, a request every 10 ms
    CHECK(p.due(start) == start);
    CHECK(p.take(start) == start);
    // The answer took 35 ms: slots at 10, 20 and 30 ms were missed. Each goes out at once
    // when the previous answer is in, and counts from its slot, not from the send.
    auto now = start + 35ms;
    CHECK(p.due(now) == start + 10ms);
    CHECK(p.take(now) == start + 10ms);
    CHECK(p.take(now + 1ms) == start + 20ms);
    CHECK(p.take(now + 2ms) == start + 30ms);
    CHECK(p.due(now + 3ms) == start + 40ms);  // caught up: wait for the next slot
}

// --- URL, request, option checks -----------------------------------------------------------

TEST_CASE("http url gives address, port and path", "[http][probes]") {
    auto u = http::parse_url("http://198.18.0.6:8080/index.html?x=1#top");
    CHECK(u.address == "198.18.0.6");
    CHECK(u.port == 8080);
    CHECK(u.path == "/index.html?x=1");
    auto v = http::parse_url("HTTP://10.0.0.1");
    CHECK(v.port == 80);
    CHECK(v.path == "/");
    CHECK(http::parse_url("http://10.0.0.1?q").path == "/?q");
    CHECK(http::request_for(u) == "GET /index.html?x=1 HTTP/1.1\r\nHost: 198.18.0.6:8080\r\n\r\n");
    CHECK(http::request_for(v) == "GET / HTTP/1.1\r\nHost: 10.0.0.1\r\n\r\n");
}

TEST_CASE("http url says why it cannot be loaded", "[http][probes]") {
    CHECK_THROWS_WITH(http::parse_url("https://198.18.0.6/"),
                      "url \"https://198.18.0.6/\": https is not supported (the built-in load generator speaks plain "
                      "HTTP/1.1)");
    CHECK_THROWS_WITH(http::parse_url("198.18.0.6:80"), "url \"198.18.0.6:80\": expected http://ADDRESS[:PORT][/PATH]");
    CHECK_THROWS_WITH(http::parse_url("http://example.com/"),
                      "url \"http://example.com/\": the host must be an IPv4 address such as 198.18.0.6, or an IPv6 "
                      "one in brackets (names are not resolved)");
    CHECK_THROWS_WITH(http::parse_url("http://198.18.0.6:0/"),
                      "url \"http://198.18.0.6:0/\": the port must be 1-65535");
    CHECK_THROWS_WITH(http::parse_url("http://198.18.0.6:99999/"),
                      "url \"http://198.18.0.6:99999/\": the port must be 1-65535");
    CHECK_THROWS_WITH(http::parse_url("http://2001:2::6/"),
                      Catch::Matchers::Contains("an IPv6 address in a URL goes in brackets"));
    CHECK_THROWS_AS(http::parse_url("http://[198.18.0.6]/"), InputError);
    CHECK_THROWS_AS(http::parse_url("http://[2001:2::6/"), InputError);
}

TEST_CASE("http url takes an IPv6 address in brackets and gives it back bracketed", "[http][probes]") {
    auto u = http::parse_url("http://[2001:2::6]:8080/x");
    CHECK(u.address == "2001:2::6");
    CHECK(u.port == 8080);
    CHECK(u.path == "/x");
    CHECK(http::parse_url("http://[2001:2::6]").port == 80);
    CHECK(http::request_for(u) == "GET /x HTTP/1.1\r\nHost: [2001:2::6]:8080\r\n\r\n");
    CHECK(http::to_string(u) == "http://[2001:2::6]:8080/x");
    CHECK(http::url_host("198.18.0.6") == "198.18.0.6");
    CHECK(http::url_host("2001:2::6") == "[2001:2::6]");
}

TEST_CASE("http probe options: defaults, and url and threads checked when the file is read", "[http][probes]") {
    auto spec = spec_from("");
    CHECK(option_int(spec, "connections") == 10);
    CHECK(option_bool(spec, "client_nodelay"));
    CHECK_FALSE(option_bool(spec, "server_split_write"));
    CHECK(option_int(spec, "timeout") == 2'000'000'000);

    std::string errors;
    spec_from("url = \"https://198.18.0.6/\"\n", &errors);
    CHECK(errors ==
          "test.toml:3:7: error: url \"https://198.18.0.6/\": https is not supported (the built-in load generator "
          "speaks plain HTTP/1.1)\n"
          " 3 | url = \"https://198.18.0.6/\"\n"
          "   |       ^~~~~~~~~~~~~~~~~~~~~\n");
    spec_from("connections = 2\nthreads = 4\n", &errors);
    CHECK(errors.find("`threads` (4) is more than `connections` (2): each thread needs a connection") !=
          std::string::npos);
}

TEST_CASE("every http metric is declared with its unit", "[http][probes]") {
    const auto* kind = find_kind("http");
    REQUIRE(kind);
    for (const char* m : {"requests_per_second", "latency_mean", "latency_p50", "latency_p90", "latency_p99",
                          "latency_p999", "latency_max", "errors", "timeouts", "non_2xx", "requests", "throughput"})
        CHECK(find_metric(*kind, m) != nullptr);
    CHECK(find_metric(*kind, "throughput")->unit == Unit::bits_per_second);
    CHECK_FALSE(find_metric(*kind, "latency_p99")->higher_is_better);
}

// --- on loopback ------------------------------------------------------------------------

namespace {

const Endpoints kLoopback{{"", "127.0.0.1", 0}, {"", "", 0}};

void check_names(const ProbeResult& r) {
    const auto* kind = find_kind("http");
    for (const auto& [name, value] : r.metrics) {
        INFO(name);
        CHECK(describe_metric(*kind, name) != nullptr);
    }
}

/// FakeServer: a blocking server on 127.0.0.1 that answers every request with `answer`, or
/// never when `answer` is empty. Creates: a listener and a thread per connection (at most
/// `connections`). Undoes: stops and joins them (Workers shuts the sockets down).
class FakeServer {
public:
    FakeServer(std::string answer, int connections) : answer_(std::move(answer)) {
        listener_ = listen_tcp("", "127.0.0.1", 0);
        port = local_port(listener_.get());
        workers_.watch(listener_.get());
        workers_.spawn([this, connections] { accept_loop(connections); });
    }
    std::uint16_t port = 0;

private:
    void accept_loop(int connections) {
        for (int i = 0; i < connections && !workers_.stopping(); ++i) {
            accepted_.push_back(accept_within(listener_.get(), 5000ms));
            int fd = accepted_.back().get();
            workers_.watch(fd);
            workers_.spawn([this, fd] { serve(fd); });
        }
    }
    void serve(int fd) {
        http::RequestScanner scanner;
        char buf[4096];
        for (;;) {
            ssize_t k = ::recv(fd, buf, sizeof buf, 0);
            if (k <= 0) return;
            auto n = scanner.scan(std::string_view(buf, static_cast<std::size_t>(k)));
            for (std::size_t i = 0; i < n && !answer_.empty(); ++i)
                if (!send_all(fd, answer_.data(), answer_.size())) return;
        }
    }

    std::string answer_;
    Fd listener_;
    std::vector<Fd> accepted_;  // filled by the accept thread only, read after the join
    Workers workers_;           // last: joined before the sockets close
};

}  // namespace

TEST_CASE("http on loopback completes requests without errors in a closed loop", "[http][probes][loopback]") {
    auto r = make_probe(spec_from("connections = 4\nthreads = 2\nserver_split_write = true\n"))->run(kLoopback, {});
    for (const auto& n : r.notes) UNSCOPED_INFO("note: " << n);
    CHECK(r.kind == "http");
    CHECK(r.metrics.at("requests") > 100);
    CHECK(r.metrics.at("errors") == 0);
    CHECK(r.metrics.at("requests_per_second") == Approx(r.metrics.at("requests") / 0.5).epsilon(0.01));
    CHECK(r.metrics.at("latency_p50") <= r.metrics.at("latency_p99"));
    CHECK(r.metrics.at("latency_p99") <= r.metrics.at("latency_max"));
    CHECK(r.metrics.at("throughput") > 0);
    CHECK(r.samples.at("latency").size() == static_cast<std::size_t>(r.metrics.at("requests")));
    check_names(r);
}

TEST_CASE("http on loopback at a fixed rate sends that rate", "[http][probes][loopback]") {
    auto r = make_probe(spec_from("connections = 5\nrate = 1000\nduration = \"1s\"\n"))->run(kLoopback, {});
    CHECK(r.metrics.at("errors") == 0);
    CHECK(r.metrics.at("requests_per_second") == Approx(1000).epsilon(0.02));
    CHECK(r.notes.at(0).find("intended send time") != std::string::npos);
}

TEST_CASE("http with a url loads that server and starts none of its own", "[http][probes][loopback]") {
    http::ServerOptions options;
    options.response_size = 100;
    http::HttpServer server({"", "127.0.0.1", 0}, options);
    auto url = "http://127.0.0.1:" + std::to_string(server.port()) + "/x";
    auto r = make_probe(spec_from("connections = 2\nurl = \"" + url + "\"\n"))->run(kLoopback, {});
    server.stop_and_join();
    CHECK(r.metrics.at("errors") == 0);
    CHECK(r.metrics.at("requests") > 0);
    CHECK(server.requests() >= r.metrics.at("requests"));  // in-flight answers at the end are not counted
    CHECK(r.notes.back() == "url given: no built-in server, the server_* options do not apply");
}

TEST_CASE("http counts non-2xx answers and timeouts as errors", "[http][probes][loopback]") {
    SECTION("404") {
        FakeServer fake("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n", 2);
        auto url = "http://127.0.0.1:" + std::to_string(fake.port) + "/";
        auto r = make_probe(spec_from("connections = 2\nurl = \"" + url + "\"\n"))->run(kLoopback, {});
        CHECK(r.metrics.at("requests") > 0);
        CHECK(r.metrics.at("non_2xx") == r.metrics.at("requests"));
        CHECK(r.metrics.at("errors") == r.metrics.at("requests"));
        CHECK(r.metrics.at("timeouts") == 0);
    }
    SECTION("no answer") {
        FakeServer fake("", 100);  // the load generator reconnects after each timeout
        auto url = "http://127.0.0.1:" + std::to_string(fake.port) + "/";
        auto r =
            make_probe(spec_from("connections = 2\ntimeout = \"100ms\"\nurl = \"" + url + "\"\n"))->run(kLoopback, {});
        CHECK(r.metrics.at("requests") == 0);
        CHECK(r.metrics.at("timeouts") >= 4);  // 2 connections x 500 ms / 100 ms, minus the last
        CHECK(r.metrics.at("errors") == r.metrics.at("timeouts"));
        CHECK(std::isnan(r.metrics.at("latency_p50")));
    }
}

TEST_CASE("http against a port nobody listens on fails with the reason", "[http][probes][loopback]") {
    std::uint16_t port = 0;
    {
        Fd l = listen_tcp("", "127.0.0.1", 0);
        port = local_port(l.get());
    }  // closed: connections to it are refused
    auto url = "http://127.0.0.1:" + std::to_string(port) + "/";
    REQUIRE_THROWS_WITH(make_probe(spec_from("connections = 1\nurl = \"" + url + "\"\n"))->run(kLoopback, {}),
                        "load generator connecting to 127.0.0.1:" + std::to_string(port) + ": Connection refused");
}
