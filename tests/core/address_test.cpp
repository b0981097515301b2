// The one prefix parser the loader, the target filter and the SSH guard share.
#include <catch2/catch.hpp>

#include "core/address.h"

using wanlab::addr::in_prefix;
using wanlab::addr::parse_prefix;

TEST_CASE("addresses and prefixes parse with their family and length, and bad ones do not", "[core][address]") {
    auto v4 = parse_prefix("203.0.113.7");
    REQUIRE(v4);
    CHECK(v4->family == AF_INET);
    CHECK(v4->length == 32);
    CHECK(v4->single());
    CHECK(parse_prefix("203.0.113.7/32")->single());
    CHECK_FALSE(parse_prefix("198.18.0.0/15")->single());
    CHECK(parse_prefix("2001:db8::/32")->family == AF_INET6);
    CHECK(parse_prefix("2001:db8::5")->single());
    for (const char* bad :
         {"", "eth0", "203.0.113.7/33", "2001:db8::/129", "203.0.113.0/", "203.0.113.0/x", "1.2.3.4/0032"})
        CHECK_FALSE(parse_prefix(bad));
}

TEST_CASE("in_prefix masks bit by bit in both families and never across them", "[core][address]") {
    CHECK(in_prefix("198.19.255.1", "198.18.0.0/15"));
    CHECK_FALSE(in_prefix("198.20.0.1", "198.18.0.0/15"));
    CHECK(in_prefix("10.1.2.3", "0.0.0.0/0"));
    CHECK(in_prefix("2001:db8:ffff::1", "2001:db8::/32"));
    CHECK_FALSE(in_prefix("2001:db9::1", "2001:db8::/32"));
    CHECK(in_prefix("2001:DB8::5", "2001:db8::5"));
    CHECK_FALSE(in_prefix("198.18.0.1", "::/0"));
    CHECK_FALSE(in_prefix("not-an-address", "198.18.0.0/15"));
}
