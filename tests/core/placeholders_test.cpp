#include <catch2/catch.hpp>

#include "core/error.h"
#include "core/placeholders.h"

using namespace wanlab;

TEST_CASE("placeholders fill names and leave every other brace as text", "[core]") {
    std::map<std::string, std::string> v{{"server", "198.18.0.6"}, {"dir", "/out/r1/trial-1-ab"}};
    CHECK(text::expand("listen {server}:8080;", v, "t") == "listen 198.18.0.6:8080;");
    // An nginx.conf's blocks need no escaping: `{` followed by anything but NAME} is text.
    CHECK(text::expand("http {\n  root {dir};\n}\n", v, "t") == "http {\n  root /out/r1/trial-1-ab;\n}\n");
    CHECK(text::expand("{ server}{server }{}{1x}", v, "t") == "{ server}{server }{}{1x}");
    // Doubled braces are single ones, so a literal {server} can be written.
    CHECK(text::expand("{{server}} {{ }}", v, "t") == "{server} { }");
    CHECK(text::expand("{server}{server}", v, "t") == "198.18.0.6198.18.0.6");
}

TEST_CASE("placeholders lists names with offsets and refuses unknown ones with a did-you-mean", "[core]") {
    auto found = text::placeholders("a {server} b {{client}} c {dir}");
    REQUIRE(found.size() == 2);
    CHECK(found[0].name == "server");
    CHECK(found[0].offset == 2);
    CHECK(found[1].name == "dir");
    CHECK(found[1].offset == 26);
    std::size_t at = 0;
    CHECK(text::unknown_placeholder("x {server} y {sever}", {"server", "client"}, at) ==
          "unknown placeholder {sever}; did you mean {server}? (known: {server}, {client}; write {{ for a literal "
          "brace)");
    CHECK(at == 13);
    CHECK(text::unknown_placeholder("{server}", {"server"}, at).empty());
    CHECK_THROWS_WITH(text::expand("{port}", {}, "service `web`"),
                      "service `web`: placeholder {port} has no value here");
}
