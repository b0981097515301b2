// The built-in rr probe: TCP request/response transactions (netperf TCP_RR), one thread per
// connection on each side, latency per transaction. See docs/probes.md.
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "core/error.h"
#include "probes/probe.h"
#include "probes/sockets.h"
#include "probes/stats.h"

namespace wanlab::probes {
namespace {

using namespace std::chrono_literals;

constexpr std::int64_t kMaxConnections = 512;         // one thread per connection and side
constexpr std::size_t kMaxKeptLatencies = 4'000'000;  // raw latencies kept in total; the histogram sees all
constexpr std::int64_t kMaxMessage = 64 * 1024 * 1024;
// A transaction slower than this ends its connection (counted in `errors`).
constexpr auto kTransactionTimeout = 5000ms;

struct Sides {
    std::size_t request, response;
    std::size_t header;  // first write of a split response
    bool client_nodelay, client_quickack, server_nodelay, server_quickack, split;
};

struct ClientTally {
    std::vector<double> latencies;  // seconds
    stats::Histogram histogram;     // nanoseconds
    IntervalTally intervals;        // per interval of the time series
    std::uint64_t transactions = 0;
    bool failed = false;
    Clock::time_point finished;
};

void serve(int fd, const Sides& s) {
    std::vector<char> request(s.request), response(s.response, 'r');
    while (recv_all(fd, request.data(), request.size(), s.server_quickack)) {
        bool ok = s.split ? send_all(fd, response.data(), s.header) &&
                                send_all(fd, response.data() + s.header, response.size() - s.header)
                          : send_all(fd, response.data(), response.size());
        if (!ok) return;
    }
}

void transact(int fd, const Sides& s, Clock::time_point start, Clock::time_point end, std::size_t keep,
              const Workers& workers, ClientTally& t) {
    std::vector<char> request(s.request, 'q'), response(s.response);
    t.latencies.reserve(std::min<std::size_t>(keep, 1 << 16));
    while (!workers.stopping()) {
        auto t0 = Clock::now();
        if (t0 >= end) break;
        if (!send_all(fd, request.data(), request.size()) ||
            !recv_all(fd, response.data(), response.size(), s.client_quickack)) {
            t.failed = !workers.stopping();
            break;
        }
        auto done = Clock::now();
        auto dt = done - t0;
        ++t.transactions;
        t.intervals.record(seconds(done - start), seconds(dt));
        t.histogram.record(static_cast<std::uint64_t>(std::chrono::nanoseconds(dt).count()));
        if (t.latencies.size() < keep) t.latencies.push_back(seconds(dt));
    }
    t.finished = Clock::now();
    ::shutdown(fd, SHUT_WR);  // the server sees EOF and returns
}

Sides sides_of(const ProbeSpec& spec) {
    Sides s{};
    auto req = option_int(spec, "request_size"), resp = option_int(spec, "response_size");
    if (req < 1 || req > kMaxMessage || resp < 1 || resp > kMaxMessage)
        throw InputError("rr probe: `request_size` and `response_size` must be 1 byte to 64MiB");
    s.request = static_cast<std::size_t>(req);
    s.response = static_cast<std::size_t>(resp);
    s.split = option_bool(spec, "server_split_write") && s.response >= 2;
    s.header = std::min<std::size_t>(64, s.response / 2);
    s.client_nodelay = option_bool(spec, "client_nodelay");
    s.client_quickack = option_bool(spec, "client_quickack");
    s.server_nodelay = option_bool(spec, "server_nodelay");
    s.server_quickack = option_bool(spec, "server_quickack");
    return s;
}

void summarize(ProbeResult& r, const std::vector<ClientTally>& tallies, double elapsed) {
    std::uint64_t transactions = 0, errors = 0;
    stats::Histogram all;
    std::vector<double> raw;
    bool complete = true;
    IntervalTally intervals;
    for (const auto& t : tallies) {
        intervals.merge(t.intervals);
        transactions += t.transactions;
        errors += t.failed ? 1 : 0;
        all.merge(t.histogram);
        complete = complete && t.latencies.size() == t.transactions;
        raw.insert(raw.end(), t.latencies.begin(), t.latencies.end());
    }
    auto& m = r.metrics;
    m["transactions_per_second"] = elapsed > 0 ? static_cast<double>(transactions) / elapsed : 0;
    m["transactions"] = static_cast<double>(transactions);
    m["errors"] = static_cast<double>(errors);
    if (complete) {  // exact, from every sample
        auto q = stats::percentiles(raw, {50, 90, 99});
        m["latency_mean"] = stats::mean(raw), m["latency_p50"] = q[0], m["latency_p90"] = q[1], m["latency_p99"] = q[2];
        m["latency_max"] = stats::max(raw);
    } else {  // within 0.8%, from the histogram
        m["latency_mean"] = all.mean() / 1e9, m["latency_p50"] = all.percentile(50) / 1e9;
        m["latency_p90"] = all.percentile(90) / 1e9, m["latency_p99"] = all.percentile(99) / 1e9;
        m["latency_max"] = all.max() / 1e9;
        r.notes.push_back(fmt::format(
            "latency percentiles from the histogram (0.8% resolution): more than {} transactions", kMaxKeptLatencies));
    }
    r.samples["latency"] = std::move(raw);
    intervals.add_series(r.series, "transactions_per_second", elapsed);
}

/// The server half on another machine (serve_far()): a thread per connection, as the probe's
/// own server.
class RrServer final : public FarServer {
public:
    RrServer(const ProbeSpec& spec, const Endpoint& at) : sides_(sides_of(spec)) {
        listener_ = listen_tcp(at.netns, at.address, at.port);
        port_ = local_port(listener_.get());
        acceptor_.spawn([this] { accept_loop(); });
    }
    ~RrServer() override {
        try {
            stop();
        } catch (...) {
            // the destructor of a server whose owner did not ask what it saw
        }
    }
    std::uint16_t port() const override { return port_; }
    FarReport stop() override {
        if (stopped_) return {};
        stopped_ = true;
        acceptor_.stop();
        acceptor_.join();
        serving_.stop();
        serving_.join();  // rethrows a connection's failure
        return {};
    }

private:
    void accept_loop() {
        accept_until_stopped(listener_.get(), acceptor_, [this](Fd fd, std::uint16_t) {
            set_int(fd.get(), IPPROTO_TCP, TCP_NODELAY, sides_.server_nodelay, "TCP_NODELAY");
            set_timeouts(fd.get(), kTransactionTimeout);
            int sv = fd.get();
            conns_.push_back(std::move(fd));
            serving_.watch(sv);
            serving_.spawn([this, sv] { serve(sv, sides_); });
        });
    }

    Sides sides_;
    Fd listener_;
    std::uint16_t port_ = 0;
    bool stopped_ = false;
    std::vector<Fd> conns_;  // the acceptor's alone until it is joined
    Workers serving_;        // joined before conns_ close
    Workers acceptor_;       // last: joined first
};

}  // namespace

std::unique_ptr<FarServer> serve_rr(const ProbeSpec& spec, const Endpoint& at) {
    return std::make_unique<RrServer>(spec, at);
}

ProbeResult run_rr(const ProbeSpec& spec, const Endpoints& where, const Tick& tick) {
    check_remote(spec, where.server);
    Sides s = sides_of(spec);
    auto n = option_int(spec, "connections");
    if (n > kMaxConnections)
        throw InputError(fmt::format(
            "rr probe: the built-in probe runs a thread per connection; at most {} connections", kMaxConnections));
    auto duration = std::chrono::nanoseconds(option_int(spec, "duration"));

    const auto& far = where.server.far;  // the server on another machine, or this probe's own here
    Fd listener;
    auto port = where.server.port;
    if (!far) {
        listener = listen_tcp(where.server.netns, where.server.address, where.server.port);
        port = local_port(listener.get());
    }
    std::vector<Fd> clients, servers;
    for (std::int64_t i = 0; i < n; ++i) {
        clients.push_back(connect_tcp(where.client.netns, where.server.address, port, kTransactionTimeout, [&](int fd) {
            set_int(fd, IPPROTO_TCP, TCP_NODELAY, s.client_nodelay, "TCP_NODELAY");
        }));
        if (far) continue;
        servers.push_back(accept_within(listener.get(), kTransactionTimeout));
        set_int(servers.back().get(), IPPROTO_TCP, TCP_NODELAY, s.server_nodelay, "TCP_NODELAY");
        set_timeouts(servers.back().get(), kTransactionTimeout);
    }
    ClientTally fresh;
    fresh.intervals = IntervalTally(seconds(std::chrono::nanoseconds(option_int(spec, "interval"))));
    std::vector<ClientTally> tallies(static_cast<std::size_t>(n), fresh);
    std::size_t keep = kMaxKeptLatencies / static_cast<std::size_t>(n);
    auto start = Clock::now(), end = start + duration;
    Workers workers;  // after the sockets: joined before they close
    for (std::size_t i = 0; i < clients.size(); ++i) {
        int c = clients[i].get();
        workers.watch(c);
        if (!far) {
            int sv = servers[i].get();
            workers.watch(sv);
            workers.spawn([sv, &s] { serve(sv, s); });
        }
        ClientTally* t = &tallies[i];
        workers.spawn([c, &s, start, end, keep, &workers, t] { transact(c, s, start, end, keep, workers, *t); });
    }
    sleep_until(end, [&] {
        if (tick) tick();
        if (workers.stopping()) workers.join();
    });
    workers.join();
    if (far) far->stop();  // rethrows its failure
    auto last = start;
    for (const auto& t : tallies) last = std::max(last, t.finished);

    ProbeResult r;
    r.began = start;
    r.kind = "rr";
    r.tool = "builtin";
    summarize(r, tallies, seconds(last - start));
    r.notes.push_back(fmt::format(
        "request {} B, response {} B{}; TCP_NODELAY client {} server {}; TCP_QUICKACK after "
        "each read: client {} server {}",
        s.request, s.response, s.split ? fmt::format(" written as {} + {} B", s.header, s.response - s.header) : "",
        s.client_nodelay ? "on" : "off", s.server_nodelay ? "on" : "off", s.client_quickack ? "on" : "kernel default",
        s.server_quickack ? "on" : "kernel default"));
    if (s.client_quickack) r.notes.push_back(kClientQuickackNote);
    if (far)
        r.notes.push_back(fmt::format("server: wanlab's probe server on the server machine ({})",
                                      host_port(where.server.address, port)));
    return r;
}

}  // namespace wanlab::probes
