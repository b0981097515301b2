// The attribute table: each row's faces agree with each other (what is encoded is what is
// decoded and compared equal), a changed kernel value is caught under the row's name, and
// every row is documented.
#include <catch2/catch.hpp>

#include <fstream>
#include <set>
#include <sstream>

#include "netem/attributes.h"
#include "netem/readback.h"
#include "tests/support/load_helper.h"

using namespace wanlab::netem;
using wanlab::testing::up_of;

namespace {

std::string describe_all(const std::vector<Mismatch>& m) { return m.empty() ? "" : describe(m); }

// Encodes as the kernel is sent it, decodes as the kernel dumps it back (minus the
// distribution table, which the kernel never dumps).
Netem round_trip(const Netem& n) { return decode_netem(netem_options(n, Psched{}, {}), Psched{}); }

}  // namespace

TEST_CASE("every netem attribute survives encoding and decoding with no mismatch", "[netem][attributes]") {
    const char* links[] = {
        "delay = \"20ms\"\njitter = \"2ms\"\ncorrelation = \"25%\"\nlimit = 5000\n",
        "loss = \"1.5%\"\nloss_correlation = \"10%\"\nduplicate = \"2%\"\nduplicate_correlation = \"5%\"\n",
        "delay = \"10ms\"\nreorder = \"25%\"\nreorder_correlation = \"50%\"\ngap = 5\n",
        "corrupt = \"0.1%\"\ncorrupt_correlation = \"3%\"\nloss = \"1%\"\necn = true\n",
        "rate = \"5gbit\"\npacket_overhead = -4\ncell_size = 48\ncell_overhead = 5\n",
        "loss = { model = \"gemodel\", p = \"1%\", r = \"30%\", \"1-h\" = \"80%\", \"1-k\" = \"0.5%\" }\n",
        "loss = { model = \"state\", p13 = \"1%\", p31 = \"90%\", p32 = \"5%\", p23 = \"8%\", p14 = \"0.1%\" }\n",
        "slot = { min_delay = \"1ms\", max_delay = \"4ms\", packets = 32, bytes = 65536 }\n",
    };
    for (const char* link : links) {
        INFO(link);
        Netem asked = up_of(link).netem;
        CHECK(describe_all(compare_netem(asked, round_trip(asked))) == "");
    }
}

TEST_CASE("a kernel value that differs is reported under its row's name", "[netem][attributes]") {
    Netem asked = up_of(
                      "delay = \"20ms\"\nduplicate = \"2%\"\ngap = 3\nreorder = \"1%\"\necn = true\nloss = \"1%\"\n"
                      "rate = \"10mbit\"\ncell_size = 48\n")
                      .netem;
    Netem kernel = round_trip(asked);
    kernel.duplicate = 0.5;
    kernel.gap = 7;
    kernel.ecn = false;
    kernel.cell_size = 64;
    CHECK(describe(compare_netem(asked, kernel)) ==
          "duplicate: asked 2%, the kernel has 50%; gap: asked 3, the kernel has 7; cell_size: asked 48, the kernel "
          "has 64; ecn: asked true, the kernel has false");
}

TEST_CASE("every [link] key of the attribute table is documented in the experiment format", "[netem][attributes]") {
    std::ifstream in(WANLAB_DOCS_DIR "/experiment-format.md");
    std::stringstream text;
    text << in.rdbuf();
    REQUIRE_FALSE(text.str().empty());
    std::set<std::string> keys;
    for (const auto& a : attributes()) {
        INFO(a.key);
        CHECK(keys.insert(a.key).second);  // one row per key
        CHECK(text.str().find(std::string("| `") + a.key + "` |") != std::string::npos);
    }
}
