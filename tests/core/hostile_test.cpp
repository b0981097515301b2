// Hostile input, round 2 (issue 40), at the core: untrusted JSON is parsed with a bound on its
// nesting, files wanlab writes are created and never followed, files it reads are looked at
// before they are opened, and nothing invisible or raw reaches a terminal.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "core/config.h"
#include "core/diagnostic.h"
#include "core/error.h"
#include "core/json.h"
#include "core/sys.h"
#include "core/text.h"

using namespace wanlab;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

struct HostileDir {
    fs::path path;
    HostileDir() {
        char name[] = "/tmp/wanlab-hostile-XXXXXX";
        REQUIRE(::mkdtemp(name));
        path = name;
    }
    ~HostileDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
};

std::string contents_of(const fs::path& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_CASE("untrusted JSON nested deeper than 64 levels is refused, not built", "[core][json][security]") {
    auto nested = [](int depth) { return std::string(depth, '[') + std::string(depth, ']'); };
    CHECK_FALSE(json_input::parse(nested(64)).is_discarded());
    CHECK(json_input::parse(nested(65)).is_discarded());
    // A million levels: refused as soon as the 65th opens, so nothing recursive ever sees it.
    CHECK(json_input::parse(nested(1'000'000)).is_discarded());
    CHECK(json_input::parse(R"({"a":{"b":[1,2,{"c":null}]}})")["a"]["b"][2].contains("c"));
    CHECK(json_input::parse("not json").is_discarded());
    CHECK_THROWS_WITH(json_input::parse_or_throw(nested(100), "column x"),
                      "column x: not JSON, or nested deeper than 64 levels");
    // Invalid UTF-8 in a stored string is shown replaced, never thrown on while dumping.
    nlohmann::json bad = std::string(
        "a\xff"
        "b");
    CHECK(json_input::dump(bad) ==
          "\"a\xEF\xBF\xBD"
          "b\"");
}

TEST_CASE("a file wanlab writes replaces a planted symlink instead of following it", "[core][files][security]") {
    HostileDir d;
    auto victim = d.path / "victim", out = d.path / "report.xml";
    std::ofstream(victim) << "precious";
    fs::create_symlink(victim, out);
    // A planted "temporary" file of the old naming is not used either.
    fs::create_symlink(victim, d.path / "report.xml.tmp");
    sys::write_file_atomic(out.string(), "<testsuites/>", "the JUnit report");
    CHECK(contents_of(victim) == "precious");
    CHECK(fs::is_regular_file(fs::symlink_status(out)));
    CHECK(contents_of(out) == "<testsuites/>");
    SECTION("with the mode asked for, whatever the umask") {
        auto key = d.path / "key.pem";
        sys::write_file_atomic(key.string(), "secret", "the rendered template", 0600);
        CHECK((fs::status(key).permissions() & fs::perms::all) == (fs::perms::owner_read | fs::perms::owner_write));
    }
    SECTION("a folder that cannot take it is said before anything runs") {
        CHECK_THAT(sys::cannot_create((d.path / "missing" / "x.html").string()), Contains("No such file"));
        CHECK(sys::cannot_create(out.string()).empty());
        CHECK_THAT(sys::cannot_create(d.path.string()),
                   Contains("is a folder") || Contains("not a folder") || Contains("it is a folder"));
    }
}

TEST_CASE("read_file refuses a device or FIFO by what it is, before opening it", "[core][files][security]") {
    CHECK_THROWS_WITH(sys::read_file("/dev/zero", 1024, "experiment file"),
                      "experiment file /dev/zero: is not a regular file (a FIFO, socket or device); give a file");
    HostileDir d;
    auto fifo = d.path / "fifo";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    CHECK_THROWS_WITH(sys::read_file(fifo.string(), 1024, "profile"), Contains("is not a regular file"));
    auto link = d.path / "link";
    fs::create_symlink("/etc/hostname", link);
    CHECK_THROWS_WITH(sys::read_file(link.string(), 1024, "journal", true), Contains("is a symbolic link"));
}

TEST_CASE("bidi overrides, zero-width characters and separators are shown escaped, never as text",
          "[core][text][security]") {
    // U+202E (right-to-left override), U+200B (zero width space), U+2066 (isolate), U+FEFF,
    // U+2028 (line separator): each changes what a line seems to say without showing itself.
    CHECK(text::terminal_safe("ab\u202Ecd") == "ab\\u202ecd");
    CHECK(text::terminal_safe("a\u200Bb") == "a\\u200bb");
    CHECK(text::terminal_safe("\u2066x\u2069") == "\\u2066x\\u2069");
    CHECK(text::terminal_safe("\uFEFFname") == "\\ufeffname");
    CHECK(text::terminal_safe("a\u2028b") == "a\\u2028b");
    CHECK(text::terminal_safe("\x1b[31mred\xc2\x9b") == "\\x1b[31mred\\u009b");  // C0 and C1, as before
    // Ordinary non-ASCII text is text.
    CHECK(text::terminal_safe("Zürich – 東京 \u2013") == "Zürich – 東京 \u2013");
    CHECK(text::control_character("name\u202E").has_value());
}

TEST_CASE("a diagnostic about a 1 MB key or line is a few lines, not megabytes", "[core][diagnostic][security]") {
    config::Documents docs;
    Diagnostics diag;
    std::string key(1'000'000, 'k');
    docs.parse("big.toml", "[link]\n" + key + " = 1\n", diag);
    Location at{"big.toml", 2, 1, 1'000'001};
    diag.error(at, fmt::format("unknown key `{}`", key), fmt::format("did you mean `{}`?", key));
    auto shown = diag.render(docs.sources());
    INFO(shown.substr(0, 400));
    CHECK(shown.size() < 4000);
    CHECK_THAT(shown, Contains("bytes more)"));
    CHECK_THAT(shown, Contains("big.toml:2:1: error: unknown key `kkk"));
}
