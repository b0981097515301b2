// The corpus: every tests/corpus/invalid/NN-name.toml must fail to load with exactly the
// diagnostics in NN-name.err; every examples/*.toml must load cleanly.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/support/load_helper.h"

namespace fs = std::filesystem;

namespace {
std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

std::vector<fs::path> files(const fs::path& dir, const char* ext) {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.path().extension() == ext) out.push_back(e.path());
    std::sort(out.begin(), out.end());
    return out;
}
}  // namespace

TEST_CASE("every invalid experiment in the corpus fails with its exact expected message", "[corpus]") {
    auto cases = files(fs::path(WANLAB_CORPUS_DIR) / "invalid", ".toml");
    REQUIRE(cases.size() >= 40);
    for (const auto& toml : cases) {
        auto expected_path = fs::path(toml).replace_extension(".err");
        INFO("corpus case " << toml.filename().string());
        REQUIRE(fs::exists(expected_path));
        auto sets_path = fs::path(toml).replace_extension(".set");
        std::vector<std::string> sets;
        if (fs::exists(sets_path)) {
            std::istringstream lines(slurp(sets_path));
            for (std::string line; std::getline(lines, line);)
                if (!line.empty()) sets.push_back(line);
        }
        auto l = wanlab::testing::load(slurp(toml), sets, toml.filename().string());
        CHECK_FALSE(l.exp.has_value());
        CHECK(l.messages == slurp(expected_path));
    }
}

TEST_CASE("every shipped example validates without warnings", "[corpus]") {
    auto examples = files(fs::path(WANLAB_EXAMPLES_DIR), ".toml");
    REQUIRE_FALSE(examples.empty());
    for (const auto& toml : examples) {
        INFO("example " << toml.filename().string());
        // The full path: a service's templates are found beside the experiment file.
        auto l = wanlab::testing::load(slurp(toml), {}, toml.string());
        CHECK(l.exp.has_value());
        CHECK(l.messages == "");
    }
}
