// Examples by name: `wanlab run buffer-sweep` takes the example when no such file is here,
// a file of that name here always wins, and an unknown name is refused with the names there
// are.
#include <catch2/catch.hpp>

#include <stdlib.h>
#include <unistd.h>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "cli/load.h"
#include "core/error.h"

using namespace wanlab;
namespace fs = std::filesystem;

namespace {

/// A fresh folder with a WANLAB_EXAMPLES folder in it, the working directory while it lives.
struct Scratch {
    fs::path dir, examples, was = fs::current_path();
    Scratch() {
        char t[] = "/tmp/wanlab-examples-XXXXXX";
        REQUIRE(::mkdtemp(t));
        dir = t;
        examples = dir / "examples";
        fs::create_directories(examples);
        std::ofstream(examples / "mine.toml") << "name = \"mine\"\n";
        std::ofstream(examples / "notes.txt") << "not an example\n";
        ::setenv("WANLAB_EXAMPLES", examples.c_str(), 1);
        fs::current_path(dir);
    }
    ~Scratch() {
        fs::current_path(was);
        ::unsetenv("WANLAB_EXAMPLES");
        std::error_code ec;
        fs::remove_all(dir, ec);
    }
};

}  // namespace

TEST_CASE("a name that is no file here is the example of that name, with or without .toml") {
    Scratch s;
    CHECK(cli::experiment_path("mine") == (s.examples / "mine.toml").string());
    CHECK(cli::experiment_path("mine.toml") == (s.examples / "mine.toml").string());
    // The shipped ones, from the source tree this binary was built from.
    auto shipped = cli::experiment_path("buffer-sweep");
    CHECK(fs::path(shipped).filename() == "buffer-sweep.toml");
    CHECK(fs::is_regular_file(shipped));
}

TEST_CASE("a file of that name here wins over the example, and a path is never looked up") {
    Scratch s;
    std::ofstream("mine") << "name = \"here\"\n";
    CHECK(cli::experiment_path("mine") == "mine");
    std::ofstream("buffer-sweep.toml") << "name = \"here\"\n";
    CHECK(cli::experiment_path("buffer-sweep.toml") == "buffer-sweep.toml");
    // A path is the user's: it is read (and fails to be) as it is.
    CHECK(cli::experiment_path("./missing.toml") == "./missing.toml");
    CHECK(cli::experiment_path("sub/mine") == "sub/mine");
}

TEST_CASE("an unknown name is refused with the names of the examples there are") {
    Scratch s;
    try {
        cli::experiment_path("buffer-swep");
        FAIL("no error");
    } catch (const InputError& e) {
        std::string what = e.what();
        CHECK_THAT(what, Catch::StartsWith(
                             "experiment file buffer-swep: No such file or directory, and no example has that name; "
                             "the examples are: "));
        CHECK_THAT(what, Catch::Contains("mine") && Catch::Contains("buffer-sweep") && Catch::Contains("udp-loss"));
        CHECK_THAT(what, !Catch::Contains("notes"));
    }
    // A hidden name is never an example.
    std::ofstream(s.examples / ".hidden.toml") << "name = \"hidden\"\n";
    CHECK_THROWS_AS(cli::experiment_path(".hidden"), InputError);
    auto names = cli::example_names();
    CHECK(std::find(names.begin(), names.end(), ".hidden") == names.end());
}

TEST_CASE("the example names are each shipped example once, sorted") {
    Scratch s;
    std::ofstream(s.examples / "buffer-sweep.toml") << "name = \"a second one\"\n";
    auto names = cli::example_names();
    CHECK(std::is_sorted(names.begin(), names.end()));
    CHECK(std::count(names.begin(), names.end(), "buffer-sweep") == 1);
    CHECK(std::count(names.begin(), names.end(), "mine") == 1);
    // WANLAB_EXAMPLES comes first: its buffer-sweep is the one taken.
    CHECK(cli::experiment_path("buffer-sweep") == (s.examples / "buffer-sweep.toml").string());
}
