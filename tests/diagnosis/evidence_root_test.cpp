// The evidence a run keeps beside its numbers, on the real machine (root) through the binary:
// captures (one pcap per lab host, bounded, listed by `results show`) and time series (every
// interval of every repeat, exported). Needs no netem: the lab's bare path carries them.
#include <cstdint>
#include <cstring>

#include "tests/support/root_helper.h"

using namespace wanlab::root_testing;

namespace {

struct Experiment {
    std::filesystem::path dir, path;
    explicit Experiment(const std::string& body) {
        char t[] = "/tmp/wanlab-evidence-XXXXXX";
        dir = ::mkdtemp(t);
        path = dir / "evidence.toml";
        std::ofstream(path) << "name = \"evidence\"\n[run]\nrepeats = 2\nwarmup = \"0s\"\ncooldown = \"0s\"\n" << body;
    }
    ~Experiment() { std::filesystem::remove_all(dir); }
    std::string wanlab(const std::string& args, int* status) const {
        return sh(fmt::format("{} {} 2>&1", WANLAB_BINARY, args), status);
    }
    /// `wanlab run` of the file as run `id`; REQUIREs exit status 0.
    void run(const std::string& id) const {
        int status = 0;
        auto out =
            wanlab(fmt::format("run {} --run {} --out {} --quiet", path.string(), id, (dir / "out").string()), &status);
        INFO(out);
        REQUIRE(status == 0);
    }
    std::string query(const std::string& sql) const {
        return sh(fmt::format("sqlite3 {} \"{}\"", (dir / "out" / "results.db").string(), sql));
    }
};

struct Pcap {
    std::uint32_t magic = 0, snaplen = 0, linktype = 0;
    std::size_t records = 0, largest = 0;
    std::uint64_t size = 0;
};

Pcap read_pcap(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::string b{std::istreambuf_iterator<char>(in), {}};
    Pcap out;
    out.size = b.size();
    if (b.size() < 24) return out;
    std::memcpy(&out.magic, b.data(), 4);
    std::memcpy(&out.snaplen, b.data() + 16, 4);
    std::memcpy(&out.linktype, b.data() + 20, 4);
    for (std::size_t off = 24; off + 16 <= b.size();) {
        std::uint32_t incl = 0;
        std::memcpy(&incl, b.data() + off + 8, 4);
        off += 16 + incl;
        if (off > b.size()) break;
        ++out.records;
        out.largest = std::max<std::size_t>(out.largest, incl);
    }
    return out;
}

}  // namespace

TEST_CASE("capture = true writes one bounded pcap per lab host and results show lists them", "[root]") {
    if (skip_unless_root()) return;
    Experiment exp(R"(
[[probe]]
name = "bulk"
kind = "throughput"
duration = "1s"
capture = true
capture_packets = 400
)");
    Cleanup cleanup("evidence-cap");
    auto before = capture();
    exp.run("evidence-cap");
    int status = 0;
    for (const char* host : {"client", "server"}) {
        INFO(host);
        auto files = sh(fmt::format("ls {}/out/evidence-cap/trial-1-*/capture-bulk-{}.pcap", exp.dir.string(), host));
        REQUIRE_FALSE(files.empty());
        auto p = read_pcap(files.substr(0, files.find('\n')));
        CHECK(p.magic == 0xa1b2c3d4);  // pcap, microseconds, this machine's byte order
        CHECK(p.snaplen == 128);       // headers only
        CHECK(p.linktype == 1);        // Ethernet
        CHECK(p.records == 400);       // the bound, of a bulk transfer's many more packets
        CHECK(p.largest <= 128);
        auto stored = exp.query(fmt::format(
            "SELECT json_extract(value, '$.packets') || ' ' || json_extract(value, '$.stopped') FROM trials, "
            "json_each(trials.captures) WHERE json_extract(value, '$.host') = '{}'",
            host));
        CHECK(stored == "400 capture_packets = 400 reached\n");
    }
    auto shown = exp.wanlab(fmt::format("results show evidence-cap --out {}", (exp.dir / "out").string()), &status);
    INFO(shown);
    CHECK_THAT(shown, Catch::Contains("\nCaptures\n") &&
                          Catch::Contains("bulk, default, client (wl-c): " + (exp.dir / "out").string() +
                                          "/evidence-cap/trial-1-") &&
                          Catch::Contains("capture-bulk-server.pcap: 400 packets"));
    CHECK(capture() == before);
}

TEST_CASE("every repeat keeps its time series: throughput, TCP_INFO per stream, latency per interval", "[root]") {
    if (skip_unless_root()) return;
    Experiment exp(R"(
[[probe]]
name = "bulk"
kind = "throughput"
duration = "1s"
interval = "100ms"
streams = 2
[[probe]]
name = "rr"
kind = "rr"
duration = "1s"
interval = "250ms"
)");
    Cleanup cleanup("evidence-series");
    exp.run("evidence-series");
    int status = 0;
    // Per repeat: one point per interval (10 of 100 ms; 4 of 250 ms), each stream its own.
    auto points = [&](const std::string& probe, const std::string& series) {
        return exp.query(
            fmt::format("SELECT group_concat(n) FROM (SELECT count(*) AS n FROM series s JOIN "
                        "measurements m ON m.id = s.measurement_id WHERE m.probe = '{}' AND "
                        "s.name = '{}' GROUP BY m.id ORDER BY m.id)",
                        probe, series));
    };
    for (const char* name : {"throughput", "stream1.cwnd", "stream2.cwnd", "stream1.srtt", "stream2.rcv_space"}) {
        INFO(name);
        auto counts = points("bulk", name);
        for (const auto& n : {counts.substr(0, counts.find(',')), counts.substr(counts.find(',') + 1)})
            CHECK(std::abs(std::stoi(n) - 10) <= 1);
    }
    CHECK(points("rr", "transactions_per_second") == "4,4\n");
    CHECK(points("rr", "latency_mean") == "4,4\n");
    // The points add up to what the repeat measured: mean of the intervals ~ the throughput.
    auto ratio = exp.query(
        "SELECT (SELECT avg(value) FROM series s JOIN measurements m ON m.id = s.measurement_id WHERE m.probe = 'bulk' "
        "AND m.repeat = 1 AND s.name = 'throughput') / (SELECT value FROM metric_values WHERE probe = 'bulk' AND "
        "repeat = 1 AND metric = 'throughput')");
    CHECK(std::stod(ratio) == Approx(1).epsilon(0.1));
    // Exported with the metrics, a row per point with its time.
    auto csv = exp.wanlab(fmt::format("results show evidence-series --out {} --export csv", (exp.dir / "out").string()),
                          &status);
    CHECK(status == 0);
    CHECK_THAT(csv, Catch::Contains(",bulk,throughput,builtin,1,stream2.cwnd,0.1") &&
                        Catch::Contains(",rr,rr,builtin,2,latency_mean,0.25"));
}

TEST_CASE("a group's probes measure at the same time, on one clock, and the group keeps its own record", "[root]") {
    if (skip_unless_root()) return;
    Experiment exp(R"(
[[probe]]
name = "bulk"
kind = "throughput"
duration = "1s"
interval = "100ms"
streams = 2
group = "together"
[[probe]]
name = "ping"
kind = "rtt"
interval = "20ms"
group = "together"
)");
    Cleanup cleanup("evidence-group");
    exp.run("evidence-group");
    // ping had no count and no duration: it took the group's 1 s, at most 50 handshakes at
    // 20 ms (alone, [run]'s 10 s and the default count would have sent 100 over 2 s).
    auto sent = [&](const char* agg) {
        return std::stod(exp.query(
            fmt::format("SELECT {}(value) FROM metric_values WHERE probe = 'ping' AND metric = 'sent'", agg)));
    };
    CHECK(sent("max") <= 50);
    CHECK(sent("min") >= 40);
    // At the same time: on the group's clock each member's first point is within its first
    // interval, not after the other's second (one after the other, ping would begin at 1 s).
    for (const char* s : {"bulk.throughput", "ping.rtt"}) {
        INFO(s);
        auto first = exp.query(fmt::format(
            "SELECT max(t) FROM (SELECT min(s.t) AS t FROM series s JOIN measurements m ON m.id = s.measurement_id "
            "WHERE m.probe = 'together' AND s.name = '{}' GROUP BY m.id)",
            s));
        CHECK(std::stod(first) < 0.3);
        auto last = exp.query(fmt::format(
            "SELECT min(t) FROM (SELECT max(s.t) AS t FROM series s JOIN measurements m ON m.id = s.measurement_id "
            "WHERE m.probe = 'together' AND s.name = '{}' GROUP BY m.id)",
            s));
        CHECK(std::stod(last) > 0.8);
    }
    // The group's record: kind group, its goodput the member's, Jain's index over 2 streams.
    CHECK(exp.query("SELECT DISTINCT kind FROM measurements WHERE probe = 'together'") == "group\n");
    auto ratio = exp.query(
        "SELECT (SELECT value FROM metric_values WHERE probe = 'together' AND repeat = 1 AND metric = 'throughput') / "
        "(SELECT value FROM metric_values WHERE probe = 'bulk' AND repeat = 1 AND metric = 'throughput')");
    CHECK(std::stod(ratio) == Approx(1));
    auto fairness =
        exp.query("SELECT value FROM metric_values WHERE probe = 'together' AND repeat = 1 AND metric = 'fairness'");
    CHECK(std::stod(fairness) > 0.5);
    CHECK(std::stod(fairness) <= 1.0);
    CHECK(exp.query("SELECT value FROM metric_values WHERE probe = 'together' AND repeat = 1 AND metric = 'flows'") ==
          "2.0\n");
}
