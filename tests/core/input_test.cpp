// Input as a trust boundary: nesting, file types and sizes, names, shell quoting, terminal
// escapes, and the diagnostics cap.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/config.h"
#include "core/error.h"
#include "core/sys.h"
#include "core/text.h"

using namespace wanlab;
namespace fs = std::filesystem;

namespace {
std::string repeat(const std::string& s, int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += s;
    return out;
}

// What /bin/sh reads `line` as: one word per line, with no expansion done by wanlab's words.
std::string shell_words(const std::string& line) {
    std::string cmd = "set -- " + line + "; for w in \"$@\"; do printf '<%s>\\n' \"$w\"; done";
    FILE* p = ::popen(("/bin/sh -c " + text::shell_quote(cmd)).c_str(), "r");
    REQUIRE(p);
    std::string out;
    char buf[256];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    REQUIRE(::pclose(p) == 0);
    return out;
}
}  // namespace

TEST_CASE("nesting deeper than the limit is found before parsing, in every form", "[security]") {
    CHECK_FALSE(config::too_deep("[link.up]\ndelay = \"20ms\"\n[sweep]\n\"link.rtt\" = [\"1ms\", \"2ms\"]\n"));
    CHECK_FALSE(config::too_deep("a = { b = [1, [2, {c = 3}]] }\n"));
    // Dots inside quoted keys, strings and comments are not nesting.
    CHECK_FALSE(
        config::too_deep("\"" + repeat("a.", 100) + "\" = '" + repeat("[{", 100) + "'  # " + repeat("[", 100) + "\n"));
    CHECK_FALSE(config::too_deep("x = \"\"\"\n" + repeat("[", 100) + "\n\"\"\"\n"));
    CHECK_FALSE(config::too_deep("[" + repeat("a.", 31) + "a]\n"));  // exactly the limit
    auto at = config::too_deep("[" + repeat("a.", 9000) + "a]\n");
    REQUIRE(at);
    CHECK(*at == std::pair<std::uint32_t, std::uint32_t>{1, 65});  // the dot of level 33
    CHECK(config::too_deep("x" + repeat(".x", 40) + " = 1\n"));
    CHECK(config::too_deep("x = " + repeat("[", 40) + repeat("]", 40) + "\n"));
    CHECK(config::too_deep("x = " + repeat("{a = ", 40) + "1" + repeat("}", 40) + "\n"));
    CHECK(config::too_deep("[a.b]\nc = " + repeat("[", 31) + repeat("]", 31) + "\n"));  // header + key + arrays
}

TEST_CASE("a deep document is reported at its position and never reaches the parser", "[security]") {
    config::Documents docs;
    Diagnostics diag;
    CHECK(docs.parse("deep.toml", "name = \"x\"\n[" + repeat("a.", 9000) + "a]\n", diag) == nullptr);
    CHECK(
        diag.render(docs.sources())
            .starts_with(
                "deep.toml:2:65: error: nested more than 32 levels deep (tables, dotted keys, inline tables and arrays "
                "together); an experiment file needs at most 5\n"));
}

TEST_CASE("strings and keys with control characters are refused where they are", "[security]") {
    config::Documents docs;
    Diagnostics diag;
    CHECK(docs.parse("c.toml", "url = \"http://x/\\r\\nX-Injected: 1\"\n\"a\\u001b\" = 1\nok = \"a\\tb\"\n", diag) ==
          nullptr);
    CHECK(diag.render(docs.sources()) ==
          "c.toml:1:7: error: this string contains U+000D (a carriage return): wanlab's keys, names, urls and values "
          "are one line of printable text\n"
          " 1 | url = \"http://x/\\r\\nX-Injected: 1\"\n"
          "   |       ^~~~~~~~~~~~~~~~~~~~~~~~~~~~\n"
          "c.toml:2:1: error: this key contains U+001B (escape): wanlab's keys, names, urls and values are one line of "
          "printable text\n"
          " 2 | \"a\\u001b\" = 1\n"
          "   | ^~~~~~~~~\n");
}

TEST_CASE("only a regular file of bounded size is read, and a FIFO does not block", "[security]") {
    char tmpl[] = "/tmp/wanlab-input-XXXXXX";
    fs::path dir = ::mkdtemp(tmpl);
    std::ofstream(dir / "ok.toml") << "name = \"x\"\n";
    CHECK(sys::read_file((dir / "ok.toml").string(), 100, "experiment file") == "name = \"x\"\n");
    CHECK_THROWS_WITH(sys::read_file(dir.string(), 100, "experiment file"),
                      "experiment file " + dir.string() + ": is a directory, not a file");
    REQUIRE(::mkfifo((dir / "fifo").c_str(), 0600) == 0);
    CHECK_THROWS_WITH(sys::read_file((dir / "fifo").string(), 100, "experiment file"),
                      Catch::EndsWith("is not a regular file (a FIFO, socket or device); give a file"));
    CHECK_THROWS_WITH(sys::read_file("/dev/zero", 100, "experiment file"), Catch::Contains("is not a regular file"));
    std::ofstream(dir / "big") << std::string(2 << 20, '#');
    CHECK_THROWS_WITH(sys::read_file((dir / "big").string(), 1 << 20, "experiment file"),
                      Catch::EndsWith("is larger than 1 MiB, the most wanlab reads"));
    fs::create_symlink(dir / "ok.toml", dir / "link");
    CHECK(sys::read_file((dir / "link").string(), 100, "x") == "name = \"x\"\n");  // followed unless asked
    CHECK_THROWS_WITH(sys::read_file((dir / "link").string(), 100, "journal", true),
                      Catch::EndsWith("is a symbolic link, which wanlab does not follow here"));
    fs::remove_all(dir);
}

TEST_CASE("device and namespace names follow the kernel's rules", "[security]") {
    CHECK(sys::device_name_problem("eth0") == "");
    CHECK(sys::device_name_problem("wlifb-0123abcd") == "");
    CHECK(sys::device_name_problem("abcdefghijklmnop") == "a device name has at most 15 bytes (IFNAMSIZ), not 16");
    CHECK(sys::device_name_problem("../../etc/passwd") == "a device name has at most 15 bytes (IFNAMSIZ), not 16");
    CHECK(sys::device_name_problem("../etc") == "a device name cannot contain `/`");
    CHECK(sys::device_name_problem("..") == "a device name cannot be \".\" or \"..\"");
    CHECK(sys::device_name_problem("eth0\nX") == "a device name cannot contain control characters");
    CHECK(sys::device_name_problem("eth0:1") == "a device name cannot contain `:`");
    CHECK(sys::device_name_problem("a b") == "a device name cannot contain ` `");
    CHECK(sys::device_name_problem("") == "a device name cannot be empty");
    CHECK(sys::netns_path("wanlab-r1-client") == "/run/netns/wanlab-r1-client");
    CHECK(sys::netns_path("/proc/1/ns/net") == "/proc/1/ns/net");
    CHECK_THROWS_WITH(sys::netns_path("../../etc/passwd"),
                      "network namespace name \"../../etc/passwd\": the name contains `/`");
    CHECK_THROWS_AS(sys::netns_path(".."), InputError);
    CHECK_THROWS_AS(sys::netns_path("/run/netns/../../etc"), InputError);
}

TEST_CASE("a shell-quoted word reads back as exactly itself, with nothing run", "[security]") {
    CHECK(text::shell_quote("net.core.rmem_max=212992") == "net.core.rmem_max=212992");
    CHECK(text::shell_quote("") == "''");
    std::vector<std::string> words{"sysctl", "-w",    "net.ipv4.ping_group_range=0 $(touch /tmp/wanlab-q)",
                                   "it's",   "`id`",  "a;b|c&d>e<f",
                                   "*",      "~root", "$HOME",
                                   "\\",     "\"",    "tab\there"};
    std::string expected;
    for (const auto& w : words) expected += "<" + w + ">\n";
    CHECK(shell_words(text::shell_join(words)) == expected);
    CHECK_FALSE(fs::exists("/tmp/wanlab-q"));
}

TEST_CASE("control characters reach a terminal as visible escapes", "[security]") {
    CHECK(text::terminal_safe("plain\ttext\n") == "plain\ttext\n");
    CHECK(text::terminal_safe("x\x1b]0;pwned\x07y") == "x\\x1b]0;pwned\\x07y");
    CHECK(text::terminal_safe("\xc2\x9b"
                              "31m") == "\\u009b31m");           // C1 CSI in UTF-8
    CHECK(text::terminal_safe("caf\xc3\xa9") == "caf\xc3\xa9");  // other UTF-8 passes
    CHECK(text::control_character("a\tb") == std::nullopt);
    CHECK(text::control_character("ab\r") == 2u);
}

TEST_CASE("an error repeated in every trial is reported once, and at most 50 are shown") {
    Diagnostics diag;
    SourceSet sources;
    for (int trial = 0; trial < 300; ++trial)
        for (std::uint32_t line = 1; line <= 60; ++line) diag.error(Location{"f.toml", line, 1, 0}, "unknown key");
    CHECK(diag.error_count() == 60);
    CHECK(diag.reported_at(Location{"f.toml", 7, 1, 0}));
    CHECK_FALSE(diag.reported_at(Location{"f.toml", 7, 2, 0}));
    auto text = diag.render(sources);
    CHECK(
        text.ends_with("f.toml:50:1: error: unknown key\nnote: 10 more diagnostics not shown; fix the ones above "
                       "first\n"));
}

TEST_CASE("text::words splits on any run of whitespace and keeps every other byte", "[core]") {
    CHECK(wanlab::text::words("  TcpExt: 1\t2\n  3 ") == std::vector<std::string>{"TcpExt:", "1", "2", "3"});
    CHECK(wanlab::text::words("/tmp/with\\040space rw - 9p") ==
          std::vector<std::string>{"/tmp/with\\040space", "rw", "-", "9p"});
    CHECK(wanlab::text::words("").empty());
    CHECK(wanlab::text::words(" \t\n").empty());
}
