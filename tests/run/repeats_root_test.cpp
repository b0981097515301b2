// Adaptive repeats end to end on the host kernel (a lab without link conditions needs no
// netem): three command probes print numbers from prepared sequences, quiet, middling and
// noisy, so Stein's rule must ask for 3, 7 and the maximum of 8 repeats; the run measures
// exactly those, the report shows each cell's count and marks the noisy one, and the
// machine ends as it started.
#include "tests/support/root_helper.h"

#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

using namespace wanlab;
using namespace wanlab::root_testing;

namespace {

struct TempDir {
    std::filesystem::path path;
    TempDir() {
        std::string t = "/tmp/wanlab-repeats-XXXXXX";
        path = ::mkdtemp(t.data());
    }
    ~TempDir() { std::filesystem::remove_all(path); }
    std::string query(const std::string& sql) const {
        auto r = sh(fmt::format("sqlite3 {}/out/results.db \"{}\" 2>/dev/null", path.string(), sql));
        while (!r.empty() && r.back() == '\n') r.pop_back();
        return r;
    }
};

// A command probe printing line k of NAME.seq at its k-th run (a counter in NAME.n).
std::string sequence_probe(const TempDir& dir, const std::string& name, const std::vector<double>& values) {
    std::ofstream seq(dir.path / (name + ".seq"));
    for (double v : values) seq << v << "\n";
    auto base = (dir.path / name).string();
    return fmt::format(R"toml([[probe]]
name = "{0}"
kind = "command"
command = ["sh", "-c", "n=$(cat {1}.n 2>/dev/null || echo 0); n=$((n + 1)); echo $n > {1}.n; sed -n \"$n\"p {1}.seq"]
metrics = [{{ name = "value", regex = "(?<value>[0-9.]+)", unit = "count", better = "higher" }}]
)toml",
                       name, base);
}

}  // namespace

TEST_CASE("adaptive repeats measure each probe as often as Stein's rule asks, and the report says so",
          "[root][repeats]") {
    if (skip_unless_root()) return;
    TempDir dir;
    Cleanup cleanup("rpt1");
    auto before = capture();
    // s0 = 1 on 100: (4.303 * 1 / 5)^2 < 3, the first three do. s0 = 3: 6.67, so 7.
    // s0 = 40: far beyond 8, so 8 and still wider than +-5%.
    std::string text = "name = \"adaptive\"\n";
    text += sequence_probe(dir, "steady", {100, 101, 99, 100, 100, 100, 100, 100, 100, 100});
    text += sequence_probe(dir, "middling", {100, 103, 97, 100, 100, 100, 100, 100, 100, 100});
    text += sequence_probe(dir, "noisy", {100, 140, 60, 100, 130, 70, 100, 120, 80, 100});
    text += "[run]\nrepeats = \"auto\"\nmax_repeats = 8\nprecision = \"5%\"\nwarmup = \"0s\"\ncooldown = \"0s\"\n";
    auto file = (dir.path / "adaptive.toml").string();
    std::ofstream(file) << text;

    int status = -1;
    auto out = sh(fmt::format("{} run {} --out {}/out --run rpt1 --no-vm 2>&1", WANLAB_BINARY, file, dir.path.string()),
                  &status);
    INFO(out);
    CHECK(status == 0);
    CHECK(capture() == before);
    CHECK(dir.query("select probe || ' ' || count(*) from measurements group by probe order by probe") ==
          "middling 7\nnoisy 8\nsteady 3");
    // Each measured the values in order: the counters ran exactly as far as the repeats.
    CHECK(sh("cat " + (dir.path / "middling.n").string()) == "7\n");
    // Progress: the first stage is open-ended ("3/3+"), then the decided count.
    CHECK_THAT(out, Catch::Contains("middling repeat 3/3+") && Catch::Contains("middling repeat 7/7") &&
                        Catch::Contains("noisy repeat 8/8"));
    CHECK_THAT(out, !Catch::Contains("steady repeat 4/"));
    CHECK_THAT(out, Catch::Contains("at most 8; n: repeats; mean +-: that interval's half-width") &&
                        Catch::Contains("max: stopped at 8 still wider"));
    CHECK_THAT(
        out, Catch::Contains("n=3, mean +-") && Catch::Contains("n=7, mean +-") && Catch::Contains("n=8 max, mean +-"));
    auto j = nlohmann::json::parse(
        sh(fmt::format("{} results show rpt1 --out {}/out --format json", WANLAB_BINARY, dir.path.string())));
    CHECK(j["run"]["repeats"]["rule"] == "auto");
    std::map<std::string, nlohmann::json> settled;
    for (const auto& c : j["cells"])
        if (c["metric"] == "value") {
            settled[c["probe"].get<std::string>()] = c["settled"];
            // Settled at 5%: the interval it shows, the mean's, is within 5%; else wider.
            CHECK((c["mean_half_width"].get<double>() <= 0.05) == (c["settled"] == true));
        }
    CHECK(settled["steady"] == true);
    CHECK(settled["middling"] == true);
    CHECK(settled["noisy"] == false);
}
