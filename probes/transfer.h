// The transfer probe's parts: its options as the built-in client and server and the curl
// runner read them, and curl's per-transfer line, which the unit tests parse directly.
//
// Contract: transfer_options() takes a spec parse_probe() validated and throws InputError
// for what only the measurement can refuse; parse_curl_line() is pure. The probes themselves
// (run_transfer, run_transfer_curl, serve_transfer) are declared in probes/probe.h.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "probes/probe.h"
#include "probes/sockets.h"
#include "probes/stats.h"

namespace wanlab::probes {

/// The largest `size` a transfer takes: 16 GiB.
inline constexpr std::uint64_t kMaxTransferSize = std::uint64_t{16} << 30;

struct TransferOptions {
    std::uint64_t size = 0;
    bool upload = false;     ///< the client sends; else the server does (a download)
    bool reuse = false;      ///< one connection per lane for all its transfers
    int parallel = 1;        ///< lanes: connections transferring at the same time
    std::int64_t count = 0;  ///< transfers per lane; 0 = until `duration`
    std::chrono::nanoseconds gap{}, timeout{}, duration{};
    Tuning tuning;  ///< on both ends' sockets (built-in only)
};

TransferOptions transfer_options(const ProbeSpec& spec);

/// What transfers came to, one lane's or several summed (merge()); seconds.
struct TransferTally {
    std::vector<double> completion, first_byte, connect;  ///< the first `keep` of each
    stats::Histogram histogram;                           ///< every completion, nanoseconds
    Series series;                                        ///< completion_time at each end
    std::uint64_t done = 0, failed = 0, timed_out = 0;
    std::uint64_t slow_start = 0, retransmits = 0;  ///< the sender's view (built-in only)
    double busy = 0, bytes = 0;                     ///< of the completed transfers: time spent, bytes moved
    std::string first_error;

    /// A completed transfer that ended `at` s into the repeat; NaN for a time not measured.
    void completed(double at, double completion, double first_byte, double connect, double bytes, std::size_t keep);
    /// One that failed, timed out or not, and why.
    void lost(bool timed_out, const std::string& why);
    void merge(const TransferTally& other);
};

/// The kind's metrics from `all`, the samples "completion" and the series "completion_time";
/// `sender_seen`: slow_start_share and retransmits are known (the built-in tool).
void add_transfer_metrics(ProbeResult& r, const TransferOptions& o, TransferTally all, double elapsed,
                          bool sender_seen);
/// "1MiB downloaded per transfer, each on a fresh connection (handshake timed), 1 connection
/// at a time": the note every transfer result carries.
std::string describe(const TransferOptions& o);

/// What curl's -w line says of one transfer (probes/curl.cpp writes the format).
struct CurlTransfer {
    int status = 0;                                 ///< HTTP status; 0 when no answer came
    int exit_code = 0;                              ///< curl's per-transfer exit code (28: timed out)
    double connect = 0, first_byte = 0, total = 0;  ///< seconds from the transfer's start
    double downloaded = 0, uploaded = 0;            ///< body bytes
    int new_connections = 0;                        ///< connections this transfer opened (0: reused one)
    std::string error;                              ///< curl's message, "" when it has none
};

/// The -w format curl is given; one line per transfer.
extern const char* const kCurlFormat;
/// One line of curl's output in kCurlFormat; nullopt for a line that is not one.
std::optional<CurlTransfer> parse_curl_line(std::string_view line);

}  // namespace wanlab::probes
