// The transfer probe with tool = "curl": curl fetches (or POSTs) against the user's `url` or
// the built-in http server sending `size` bytes, and times each transfer itself (-w), so the
// numbers are what `curl -w %{time_total}` prints. A fresh connection per transfer is one curl
// process per transfer; `reuse` is one process fetching `count` URLs over one connection.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"
#include "core/process.h"
#include "core/units.h"
#include "probes/http.h"
#include "probes/probe.h"
#include "probes/sockets.h"
#include "probes/stats.h"
#include "probes/transfer.h"

namespace wanlab::probes {

const char* const kCurlFormat =
    "wanlab-transfer %{http_code} %{exitcode} %{time_connect} %{time_starttransfer} %{time_total} "
    "%{size_download} %{size_upload} %{num_connects} %{errormsg}\\n";

namespace {

using namespace std::chrono_literals;

// URLs one curl process fetches at most with `reuse`; more are several processes in turn.
constexpr std::int64_t kUrlsPerProcess = 1000;
// A curl process may take this much beyond its transfers' own timeouts (its start, its exit).
constexpr auto kProcessGrace = 10s;
constexpr std::size_t kKeep = 1'000'000;  // completion times kept per lane

template <typename T>
bool number(std::string_view word, T& out) {
    if constexpr (std::is_floating_point_v<T>) {
        // from_chars for double: GCC 11+; curl prints plain decimals ("0.150311").
        std::string s(word);
        char* end = nullptr;
        out = std::strtod(s.c_str(), &end);
        return !s.empty() && end == s.c_str() + s.size();
    } else {
        auto [p, ec] = std::from_chars(word.data(), word.data() + word.size(), out);
        return ec == std::errc() && p == word.data() + word.size();
    }
}

/// A temporary file of `size` zero bytes (sparse) for curl to upload; removed with it.
class UploadFile {
public:
    explicit UploadFile(std::uint64_t size) {
        char name[] = "/tmp/wanlab-upload-XXXXXX";
        int fd = ::mkostemp(name, O_CLOEXEC);
        if (fd < 0) sys::fail_errno("creating the upload file");
        path_ = name;
        bool ok = ::ftruncate(fd, static_cast<off_t>(size)) == 0;
        ::close(fd);
        if (!ok) {
            ::unlink(name);
            sys::fail_errno("sizing the upload file");
        }
    }
    ~UploadFile() { ::unlink(path_.c_str()); }
    UploadFile(const UploadFile&) = delete;
    UploadFile& operator=(const UploadFile&) = delete;
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

struct Stopped {};

struct CurlLane {
    TransferTally tally;
    std::uint64_t extra_connections = 0;  // transfers that opened a connection where `reuse` asked for one
    Clock::time_point finished;
};

struct Plan {
    std::string exe;
    std::string url;
    std::string upload;        // the file to POST, or ""
    std::uint64_t expect = 0;  // body bytes a download must bring (the built-in server's); 0 = any
    TransferOptions o;
};

std::vector<std::string> curl_argv(const Plan& p, std::int64_t urls) {
    std::vector<std::string> argv{
        p.exe, "-sS",      "--max-time", fmt::format("{:.3f}", std::chrono::duration<double>(p.o.timeout).count()),
        "-w",  kCurlFormat};
    if (!p.upload.empty())
        for (const char* a : {"--data-binary", "", "-H", "Content-Type: application/octet-stream", "-H", "Expect:"})
            argv.emplace_back(*a ? a : "@" + p.upload);
    for (std::int64_t i = 0; i < urls; ++i) {
        argv.emplace_back("-o");
        argv.emplace_back("/dev/null");
        argv.push_back(p.url);
    }
    return argv;
}

void record(const Plan& p, const CurlTransfer& c, double began, bool first_of_process, CurlLane& lane) {
    auto& t = lane.tally;
    bool ok_status = c.status >= 200 && c.status < 300;
    bool whole = p.expect == 0 || static_cast<std::uint64_t>(c.downloaded) == p.expect;
    if (c.exit_code == 28)
        t.lost(true, fmt::format("curl: {}", c.error));
    else if (c.exit_code != 0)
        t.lost(false, fmt::format("curl exit code {}: {}", c.exit_code, c.error));
    else if (!ok_status)
        t.lost(false, fmt::format("HTTP status {}", c.status));
    else if (!whole)
        t.lost(false, fmt::format("{} of {} bytes", c.downloaded, p.expect));
    else
        t.completed(began + c.total, c.total, p.o.upload ? std::nan("") : c.first_byte,
                    c.new_connections > 0 ? c.connect : std::nan(""), p.o.upload ? c.uploaded : c.downloaded, kKeep);
    if (p.o.reuse && !first_of_process && c.new_connections > 0) lane.extra_connections += 1;
}

void curl_lane(const Plan& p, const Endpoint& client, Clock::time_point start, Clock::time_point end,
               const std::atomic<bool>& stop, CurlLane& lane) {
    auto tick = [&stop] {
        if (stop.load()) throw Stopped{};
    };
    try {
        for (std::int64_t n = 0; !stop.load() && Clock::now() < end && (p.o.count == 0 || n < p.o.count);) {
            if (n > 0 && p.o.gap.count() > 0) std::this_thread::sleep_for(p.o.gap);
            std::int64_t urls = p.o.reuse ? std::min(p.o.count - n, kUrlsPerProcess) : 1;
            double began = seconds(Clock::now() - start);
            sys::Process curl(client.netns, curl_argv(p, urls));
            auto limit = std::chrono::duration_cast<std::chrono::milliseconds>(p.o.timeout * urls + kProcessGrace);
            auto out = curl.wait(limit, tick);
            std::istringstream lines(out.out);
            std::string line;
            std::int64_t seen = 0;
            while (std::getline(lines, line))
                if (auto c = parse_curl_line(line)) {
                    record(p, *c, began, seen == 0, lane);
                    began += c->total;
                    ++seen;
                }
            // curl itself failed (or was killed) before it said a word of some
            for (auto why =
                     fmt::format("curl {}{}", out.timed_out ? "killed: too slow" : sys::describe_status(out.status),
                                 out.err.empty() ? "" : ": " + sys::tail_lines(out.err));
                 seen < urls; ++seen)
                lane.tally.lost(false, why);
            n += urls;
        }
    } catch (const Stopped&) {
        // the probe was stopped: the transfer curl was making is not counted
    }
    lane.finished = Clock::now();
}

}  // namespace

std::optional<CurlTransfer> parse_curl_line(std::string_view line) {
    constexpr std::string_view kTag = "wanlab-transfer ";
    if (!line.starts_with(kTag)) return std::nullopt;
    line.remove_prefix(kTag.size());
    std::vector<std::string_view> words;
    while (words.size() < 8) {
        auto space = line.find(' ');
        words.push_back(line.substr(0, space));
        if (space == std::string_view::npos) {
            line = {};
            break;
        }
        line.remove_prefix(space + 1);
    }
    if (words.size() < 8) return std::nullopt;
    CurlTransfer c;
    if (!number(words[0], c.status) || !number(words[1], c.exit_code) || !number(words[2], c.connect) ||
        !number(words[3], c.first_byte) || !number(words[4], c.total) || !number(words[5], c.downloaded) ||
        !number(words[6], c.uploaded) || !number(words[7], c.new_connections))
        return std::nullopt;
    c.error = std::string(line);
    return c;
}

ProbeResult run_transfer_curl(const ProbeSpec& spec, const Endpoints& where, const Tick& tick) {
    check_remote(spec, where.server);
    Plan p;
    p.o = transfer_options(spec);
    p.exe = sys::find_tool("curl");
    std::string url = option_string(spec, "url");
    std::optional<http::HttpServer> server;
    if (url.empty()) {
        if (p.o.upload) throw InputError("transfer probe: an upload with curl needs a `url` that takes a POST");
        http::ServerOptions options;
        options.response_size = static_cast<std::size_t>(p.o.size);
        options.threads = std::min(p.o.parallel, 4);
        server.emplace(where.server, options);
        url = http::to_string(http::Url{where.server.address, server->port(), "/"});
        p.expect = p.o.size;
    }
    p.url = url;
    std::optional<UploadFile> file;
    if (p.o.upload) {
        file.emplace(p.o.size);
        p.upload = file->path();
    }

    std::vector<CurlLane> lanes(static_cast<std::size_t>(p.o.parallel));
    std::atomic<bool> stop{false};
    std::atomic<std::size_t> running{lanes.size()};
    auto start = Clock::now(), end = start + p.o.duration;
    std::vector<std::thread> threads;
    auto join = [&] {
        stop = true;
        for (auto& th : threads) th.join();
        threads.clear();
    };
    try {
        for (auto& lane : lanes)
            threads.emplace_back([&, t = &lane] {
                curl_lane(p, where.client, start, end, stop, *t);
                running.fetch_sub(1);
            });
        while (running.load() > 0) {
            if (tick) tick();
            if (server && server->failed()) break;
            std::this_thread::sleep_for(20ms);
        }
    } catch (...) {
        join();
        throw;
    }
    join();
    if (server) server->stop_and_join();  // rethrows its failure

    TransferTally all;
    std::uint64_t extra_connections = 0;
    auto last = start;
    for (const auto& lane : lanes) {
        all.merge(lane.tally);
        extra_connections += lane.extra_connections;
        last = std::max(last, lane.finished);
    }
    ProbeResult r;
    r.began = start;
    r.kind = "transfer";
    r.tool = "curl";
    add_transfer_metrics(r, p.o, std::move(all), seconds(last - start), false);
    r.notes.push_back(describe(p.o));
    r.notes.push_back(fmt::format("command: {} (times from curl's -w: time_total, time_starttransfer, time_connect)",
                                  fmt::join(curl_argv(p, 1), " ")));
    if (server) r.notes.push_back(fmt::format("server: wanlab's built-in http server, {} B body per answer", p.o.size));
    r.notes.push_back("curl: no slow_start_share or retransmits (they come from the built-in server's sockets)");
    if (extra_connections > 0)
        r.notes.push_back(
            fmt::format("{} transfers opened a new connection where `reuse` asked for one (the server "
                        "closed the previous one)",
                        extra_connections));
    return r;
}

}  // namespace wanlab::probes
