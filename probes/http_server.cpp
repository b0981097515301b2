// The http probe's built-in server: every thread an epoll loop over non-blocking sockets that
// accepts from one shared listener (EPOLLEXCLUSIVE) and answers each request with the same
// 200 response, written in one send() or, with split_write, headers and body in two.
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <memory>
#include <unordered_map>

#include "probes/http.h"

namespace wanlab::probes::http {

struct ServerShared {
    ServerOptions options;
    std::string response;  // headers, then the body, in one buffer
    std::size_t header_bytes = 0;
    std::atomic<std::uint64_t> requests{0};
    std::atomic<bool> stopped_by_owner{false};
};

namespace {

constexpr std::uint64_t kListener = UINT64_MAX;
constexpr int kWaitMs = 20;  // how soon a thread notices stop()

struct Connection {
    Fd fd;
    RequestScanner scanner;
    std::uint64_t owed = 0;  // requests read but not yet fully answered
    std::size_t offset = 0;  // bytes of the current response sent
    bool writing = false;    // EPOLLOUT is registered
};

/// One server thread: its epoll set, its connections (closed when the loop returns).
class ServeLoop {
public:
    ServeLoop(int listener, ServerShared& shared, const Workers& workers)
        : listener_(listener), s_(shared), workers_(workers) {}

    void run() {
        epoll_ = epoll_instance();
        epoll_set(epoll_.get(), EPOLL_CTL_ADD, listener_, EPOLLIN | EPOLLEXCLUSIVE, kListener);
        std::array<epoll_event, 256> events{};
        while (!workers_.stopping()) {
            int n = ::epoll_wait(epoll_.get(), events.data(), static_cast<int>(events.size()), kWaitMs);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) sys::fail_errno("waiting for HTTP server events");
            for (int i = 0; i < n; ++i) on_event(events[static_cast<std::size_t>(i)]);
        }
        s_.requests += answered_;
    }

private:
    void on_event(const epoll_event& e) {
        if (e.data.u64 == kListener) return accept_all();
        auto it = connections_.find(static_cast<int>(e.data.u64));
        if (it == connections_.end()) return;
        Connection& c = *it->second;
        if ((e.events & (EPOLLIN | EPOLLERR | EPOLLHUP)) && !read(c)) return;
        if (e.events & EPOLLOUT) write(c);
    }

    void accept_all() {
        for (;;) {
            Fd fd(::accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
            if (!fd && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
            if (!fd && (errno == EINTR || errno == ECONNABORTED)) continue;
            if (!fd) sys::fail_errno("accepting an HTTP connection");
            set_int(fd.get(), IPPROTO_TCP, TCP_NODELAY, s_.options.nodelay, "TCP_NODELAY");
            int key = fd.get();
            epoll_set(epoll_.get(), EPOLL_CTL_ADD, key, EPOLLIN, static_cast<std::uint64_t>(key));
            auto c = std::make_unique<Connection>();
            c->fd = std::move(fd);
            connections_[key] = std::move(c);
        }
    }

    /// False when the connection was closed.
    bool read(Connection& c) {
        ssize_t k = ::recv(c.fd.get(), buffer_.data(), buffer_.size(), 0);
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return true;
        if (k <= 0) return close(c);
        // Not sticky: the kernel may leave quick-ack mode after any segment (see sockets.cpp).
        if (s_.options.quickack) set_int(c.fd.get(), IPPROTO_TCP, TCP_QUICKACK, 1, "TCP_QUICKACK");
        c.owed += c.scanner.scan(std::string_view(buffer_.data(), static_cast<std::size_t>(k)));
        return write(c);
    }

    /// Sends what is owed until done or the socket is full. False when the connection was closed.
    bool write(Connection& c) {
        std::size_t total = s_.response.size(), head = s_.header_bytes;
        bool split = s_.options.split_write && total > head;
        while (c.owed > 0) {
            std::size_t stop = split && c.offset < head ? head : total;
            ssize_t k = ::send(c.fd.get(), s_.response.data() + c.offset, stop - c.offset, MSG_NOSIGNAL);
            if (k < 0 && errno == EINTR) continue;
            if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return want_write(c, true);
            if (k < 0) return close(c);
            c.offset += static_cast<std::size_t>(k);
            if (c.offset < total) continue;
            c.offset = 0;
            --c.owed;
            ++answered_;
        }
        return want_write(c, false);
    }

    bool want_write(Connection& c, bool on) {
        if (c.writing != on)
            epoll_set(epoll_.get(), EPOLL_CTL_MOD, c.fd.get(), EPOLLIN | (on ? EPOLLOUT : 0u),
                      static_cast<std::uint64_t>(c.fd.get()));
        c.writing = on;
        return true;
    }

    bool close(Connection& c) {
        connections_.erase(c.fd.get());  // closing the socket removes it from the epoll set
        return false;
    }

    int listener_;
    ServerShared& s_;
    const Workers& workers_;
    Fd epoll_;  // before the connections: they close first
    std::unordered_map<int, std::unique_ptr<Connection>> connections_;
    std::array<char, 64 * 1024> buffer_{};
    std::uint64_t answered_ = 0;
};

}  // namespace

HttpServer::HttpServer(const Endpoint& at, const ServerOptions& options) : shared_(std::make_unique<ServerShared>()) {
    shared_->options = options;
    std::string head = response_headers(options.response_size);
    shared_->header_bytes = head.size();
    shared_->response = head + std::string(options.response_size, 'x');
    listener_ = listen_tcp(at.netns, at.address, at.port);
    set_nonblocking(listener_.get());
    port_ = local_port(listener_.get());
    workers_ = std::make_unique<Workers>();
    int listener = listener_.get();
    ServerShared* shared = shared_.get();
    const Workers* workers = workers_.get();
    for (int t = 0; t < std::max(1, options.threads); ++t)
        workers_->spawn([listener, shared, workers] { ServeLoop(listener, *shared, *workers).run(); });
}

HttpServer::~HttpServer() = default;  // workers_ first: stops and joins, then the listener closes

bool HttpServer::failed() const { return workers_->stopping() && !shared_->stopped_by_owner.load(); }

void HttpServer::stop_and_join() {
    shared_->stopped_by_owner = true;
    workers_->stop();
    workers_->join();
}

std::uint64_t HttpServer::requests() const { return shared_->requests.load(); }

}  // namespace wanlab::probes::http
