// The http probe's load generator: every thread an epoll loop over its share of the
// connections, non-blocking, one request in flight per connection (keep-alive, no
// pipelining), paced by a Pacer (closed loop or fixed rate), with a timerfd for the next
// scheduled send and a scan for timeouts every 10 ms. A failed or closed connection is
// reopened; failures while connecting at the start abort the probe instead.
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <queue>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "probes/http.h"

namespace wanlab::probes::http {
namespace {

using namespace std::chrono_literals;

constexpr std::uint64_t kTimer = UINT64_MAX;
constexpr auto kScanEvery = 10ms;   // timeouts and retries are checked this often
constexpr auto kRetryAfter = 10ms;  // a connection that could not connect tries again after this

/// The start signal: every thread connects, counts itself ready, then waits for `start`.
struct StartLine {
    std::atomic<int> ready{0};
    std::atomic<Clock::rep> start{0};  // Clock ticks since its epoch; 0 = not yet
};

enum class Failure { connect, socket, timeout };

struct Conn {
    enum class State { closed, connecting, idle, busy };
    std::size_t index = 0;         // among all the probe's connections (spreads the pacing)
    std::uint32_t generation = 0;  // of the socket; events of an older one are ignored
    Fd fd;
    State state = State::closed;
    Pacer pacer;
    ResponseParser parser;
    Clock::time_point origin;  // the request's latency counts from here
    Clock::time_point since;   // request sent, connect started, or closed
    std::size_t written = 0;   // bytes of the request sent
    bool writing = false;      // EPOLLOUT registered while busy
    bool queued = false;       // has an entry in the slot queue
};

/// One load generator thread: its connections, epoll set, timer and tally.
class LoadLoop {
public:
    LoadLoop(const Endpoint& client, const LoadOptions& o, const std::vector<std::size_t>& indices, std::size_t keep,
             StartLine& line, const Workers& workers)
        : client_(client), o_(o), request_(request_for(o.url)), peer_(sock_addr(o.url.address, o.url.port)),
          keep_(keep), line_(line), workers_(workers), conns_(indices.size()) {
        for (std::size_t i = 0; i < indices.size(); ++i) conns_[i].index = indices[i];
    }

    void run() {
        NetnsScope in(client_.netns);  // for the thread's life: reconnects open sockets here too
        epoll_ = epoll_instance();
        timer_ = Fd(::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
        if (!timer_) sys::fail_errno("creating a timerfd");
        epoll_set(epoll_.get(), EPOLL_CTL_ADD, timer_.get(), EPOLLIN, kTimer);
        if (!connect_all() || !wait_for_start()) return;
        measure();
    }

    LoadTally tally;

private:
    bool connect_all() {
        auto now = Clock::now();
        for (auto& c : conns_) open(c, now);
        auto up = [this] {
            for (const auto& c : conns_)
                if (c.state != Conn::State::idle) return false;
            return true;
        };
        while (!up()) {
            if (workers_.stopping()) return false;
            wait(Clock::now() + kScanEvery);
            scan(Clock::now());
        }
        ++line_.ready;
        return true;
    }

    bool wait_for_start() {
        while (line_.start.load() == 0) {
            if (workers_.stopping()) return false;
            std::this_thread::sleep_for(1ms);
        }
        start_ = Clock::time_point(Clock::duration(line_.start.load()));
        end_ = start_ + std::chrono::duration_cast<Clock::duration>(o_.duration);
        for (auto& c : conns_) c.pacer = Pacer(o_.requests_per_second, o_.connections, c.index, start_);
        std::this_thread::sleep_until(start_);
        return true;
    }

    void measure() {
        measuring_ = true;
        tally.intervals = IntervalTally(seconds(o_.interval));
        tally.samples.reserve(std::min<std::size_t>(keep_, 1 << 16));
        auto now = Clock::now();
        for (auto& c : conns_)
            if (c.state == Conn::State::idle) next(c, now);
        while (!workers_.stopping() && (now = Clock::now()) < end_) {
            wait(std::min(end_, now + kScanEvery));
            now = Clock::now();
            if (now - last_scan_ >= kScanEvery) scan(now);
        }
        tally.elapsed = seconds(end_ - start_);
    }

    /// One epoll_wait (until `until` at the latest) and its events.
    void wait(Clock::time_point until) {
        auto ms = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now()).count();
        int timeout = static_cast<int>(std::clamp<std::int64_t>(ms, 0, 10));
        int n = ::epoll_wait(epoll_.get(), events_.data(), static_cast<int>(events_.size()), timeout);
        if (n < 0 && errno == EINTR) return;
        if (n < 0) sys::fail_errno("waiting for HTTP client events");
        for (int i = 0; i < n; ++i) on_event(events_[static_cast<std::size_t>(i)], Clock::now());
    }

    void on_event(const epoll_event& e, Clock::time_point now) {
        if (e.data.u64 == kTimer) return on_timer(now);
        Conn& c = conns_[e.data.u64 & 0xffffffffu];
        if (e.data.u64 >> 32 != c.generation) return;  // an event of a socket closed in this batch
        if (c.state == Conn::State::connecting) return on_connected(c, now);
        if (e.events & (EPOLLIN | EPOLLERR | EPOLLHUP)) on_readable(c, now);
        if (c.state == Conn::State::busy && c.writing && (e.events & EPOLLOUT)) send_request(c, now);
    }

    std::uint64_t tag(const Conn& c) const {
        return std::uint64_t{c.generation} << 32 | static_cast<std::uint64_t>(&c - conns_.data());
    }

    // --- connections ---

    void open(Conn& c, Clock::time_point now) {
        ++c.generation;
        c.fd = Fd(::socket(peer_.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
        if (!c.fd) sys::fail_errno("opening a socket for the load generator");
        set_int(c.fd.get(), IPPROTO_TCP, TCP_NODELAY, o_.nodelay, "TCP_NODELAY");
        if (!client_.address.empty()) bind_to(c.fd.get(), peer_.family(), client_.address, 0, "the load generator");
        c.state = Conn::State::connecting;
        c.since = now;
        c.writing = false;
        c.parser.reset();
        if (::connect(c.fd.get(), peer_.get(), peer_.len) != 0 && errno != EINPROGRESS)
            return fail(c, Failure::connect, std::strerror(errno), now);
        epoll_set(epoll_.get(), EPOLL_CTL_ADD, c.fd.get(), EPOLLOUT, tag(c));
    }

    void on_connected(Conn& c, Clock::time_point now) {
        int err = get_int(c.fd.get(), SOL_SOCKET, SO_ERROR, "SO_ERROR");
        if (err != 0) return fail(c, Failure::connect, std::strerror(err), now);
        c.state = Conn::State::idle;
        epoll_set(epoll_.get(), EPOLL_CTL_MOD, c.fd.get(), EPOLLIN, tag(c));
        if (measuring_) next(c, now);
    }

    /// Counts the failure, closes the socket and opens a new one (after kRetryAfter when the
    /// connect itself failed). Before the measurement starts, throws instead.
    void fail(Conn& c, Failure f, const std::string& why, Clock::time_point now) {
        if (!measuring_ && f == Failure::connect)
            throw Error(
                fmt::format("load generator connecting to {}: {}", host_port(o_.url.address, o_.url.port), why));
        if (!measuring_)
            throw Error(fmt::format("load generator, connection to {} before the start: {}",
                                    host_port(o_.url.address, o_.url.port), why));
        ++(f == Failure::timeout ? tally.timeouts : tally.socket_errors);
        c.fd.reset();  // also leaves the epoll set
        c.state = Conn::State::closed;
        c.since = now;
        if (f != Failure::connect) open(c, now);
    }

    /// The server closed the connection (or asked to): a new one, not an error.
    void reopen(Conn& c, Clock::time_point now) {
        ++tally.reconnects;
        c.fd.reset();
        open(c, now);
    }

    /// Every kScanEvery: requests and connects past the timeout, retries of failed connects.
    void scan(Clock::time_point now) {
        last_scan_ = now;
        for (auto& c : conns_) {
            if (c.state == Conn::State::busy && now - c.since > o_.timeout)
                fail(c, Failure::timeout, "no answer within the timeout", now);
            else if (c.state == Conn::State::connecting && now - c.since > o_.timeout)
                fail(c, Failure::connect, "no connection within the timeout", now);
            else if (c.state == Conn::State::closed && now - c.since >= kRetryAfter)
                open(c, now);
        }
    }

    // --- requests ---

    /// An idle connection: sends now if its slot has come, else queues it for the timer.
    void next(Conn& c, Clock::time_point now) {
        if (now >= end_) return;
        auto due = c.pacer.due(now);
        if (due <= now) return start_request(c, now);
        if (c.queued) return;  // its entry is still in the queue, with this same time
        c.queued = true;
        slots_.emplace(due, static_cast<std::size_t>(&c - conns_.data()));
        if (due < armed_) arm(due);
    }

    void on_timer(Clock::time_point now) {
        std::uint64_t expirations = 0;
        if (::read(timer_.get(), &expirations, sizeof expirations) < 0 && errno != EAGAIN)
            sys::fail_errno("reading a timerfd");
        armed_ = Clock::time_point::max();
        while (!slots_.empty() && slots_.top().first <= now) {
            Conn& c = conns_[slots_.top().second];
            slots_.pop();
            c.queued = false;
            if (c.state == Conn::State::idle) start_request(c, now);
        }
        if (!slots_.empty()) arm(slots_.top().first);
    }

    void arm(Clock::time_point at) {
        armed_ = at;
        auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(at.time_since_epoch()).count();
        itimerspec spec{};
        spec.it_value.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
        spec.it_value.tv_nsec = static_cast<long>(ns % 1'000'000'000);
        if (spec.it_value.tv_sec == 0 && spec.it_value.tv_nsec == 0) spec.it_value.tv_nsec = 1;  // 0 would disarm
        if (::timerfd_settime(timer_.get(), TFD_TIMER_ABSTIME, &spec, nullptr) != 0)
            sys::fail_errno("arming a timerfd");
    }

    void start_request(Conn& c, Clock::time_point now) {
        c.origin = c.pacer.take(now);
        c.since = now;
        c.written = 0;
        c.state = Conn::State::busy;
        c.parser.reset();
        send_request(c, now);
    }

    void send_request(Conn& c, Clock::time_point now) {
        while (c.written < request_.size()) {
            ssize_t k = ::send(c.fd.get(), request_.data() + c.written, request_.size() - c.written, MSG_NOSIGNAL);
            if (k < 0 && errno == EINTR) continue;
            if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return want_write(c, true);
            if (k < 0) return fail(c, Failure::socket, std::strerror(errno), now);
            c.written += static_cast<std::size_t>(k);
        }
        if (c.writing) want_write(c, false);
    }

    void want_write(Conn& c, bool on) {
        epoll_set(epoll_.get(), EPOLL_CTL_MOD, c.fd.get(), EPOLLIN | (on ? EPOLLOUT : 0u), tag(c));
        c.writing = on;
    }

    void on_readable(Conn& c, Clock::time_point now) {
        ssize_t k = ::recv(c.fd.get(), buffer_.data(), buffer_.size(), 0);
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
        if (k < 0) return fail(c, Failure::socket, std::strerror(errno), now);
        if (k == 0) return on_eof(c, now);
        // Not sticky: the kernel may leave quick-ack mode after any segment (see sockets.cpp).
        if (o_.quickack) set_int(c.fd.get(), IPPROTO_TCP, TCP_QUICKACK, 1, "TCP_QUICKACK");
        if (c.state != Conn::State::busy) return fail(c, Failure::socket, "bytes nobody asked for", now);
        auto n = static_cast<std::size_t>(k);
        std::size_t used = c.parser.feed(std::string_view(buffer_.data(), n));
        if (c.parser.state() == ResponseParser::State::failed) return fail(c, Failure::socket, c.parser.error(), now);
        if (used < n) return fail(c, Failure::socket, "more bytes than the response", now);
        if (c.parser.state() == ResponseParser::State::complete) complete(c, now);
    }

    void on_eof(Conn& c, Clock::time_point now) {
        if (c.state != Conn::State::busy) return reopen(c, now);  // an idle keep-alive connection closed
        c.parser.eof();
        if (c.parser.state() == ResponseParser::State::failed) return fail(c, Failure::socket, c.parser.error(), now);
        complete(c, now);  // a body that ran to EOF; keep_alive() is false, so it reopens
    }

    void complete(Conn& c, Clock::time_point now) {
        if (now <= end_) {
            auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now - c.origin).count();
            tally.latency.record(static_cast<std::uint64_t>(std::max<std::int64_t>(ns, 0)));
            if (tally.samples.size() < keep_) tally.samples.push_back(static_cast<double>(ns) / 1e9);
            tally.intervals.record(seconds(now - start_), static_cast<double>(ns) / 1e9);
            ++tally.requests;
            tally.response_bytes += c.parser.total_bytes();
            if (c.parser.status() < 200 || c.parser.status() > 299) ++tally.non_2xx;
        }
        c.state = Conn::State::idle;
        if (!c.parser.keep_alive()) return reopen(c, now);
        next(c, now);
    }

    const Endpoint& client_;
    const LoadOptions& o_;
    std::string request_;
    SockAddr peer_;
    std::size_t keep_;
    StartLine& line_;
    const Workers& workers_;
    Fd epoll_, timer_;  // before the connections: they close first
    std::vector<Conn> conns_;
    using Slot = std::pair<Clock::time_point, std::size_t>;  // (due, connection)
    std::priority_queue<Slot, std::vector<Slot>, std::greater<Slot>> slots_;
    Clock::time_point armed_ = Clock::time_point::max(), start_, end_, last_scan_;
    bool measuring_ = false;
    std::array<epoll_event, 256> events_{};
    std::array<char, 64 * 1024> buffer_{};
};

}  // namespace

LoadTally run_load(const Endpoint& client, const LoadOptions& o, const Tick& tick) {
    if (o.connections == 0 || o.threads < 1)
        throw InputError("http probe: needs at least one connection and one thread");
    auto threads = std::min<std::size_t>(static_cast<std::size_t>(o.threads), o.connections);
    StartLine line;
    std::vector<std::unique_ptr<LoadLoop>> loops;
    Workers workers;  // after the loops: joined before they go
    for (std::size_t t = 0; t < threads; ++t) {
        std::vector<std::size_t> mine;
        for (std::size_t i = t; i < o.connections; i += threads) mine.push_back(i);
        loops.push_back(std::make_unique<LoadLoop>(client, o, mine, o.keep_samples / threads, line, workers));
    }
    for (auto& loop : loops) workers.spawn([l = loop.get()] { l->run(); });
    auto check = [&tick, &workers] {
        if (tick) tick();
        if (!workers.stopping()) return;
        workers.join();  // rethrows the error that stopped them
        throw Error("the load generator stopped early");
    };
    while (line.ready.load() < static_cast<int>(threads)) {  // each thread bounds its connects by the timeout
        std::this_thread::sleep_for(5ms);
        check();
    }
    auto start = Clock::now() + 2ms;  // in every thread's future
    line.start = start.time_since_epoch().count();
    sleep_until(start + std::chrono::duration_cast<Clock::duration>(o.duration), check);
    workers.join();
    LoadTally all;
    for (const auto& loop : loops) all.merge(loop->tally);
    return all;
}

}  // namespace wanlab::probes::http
