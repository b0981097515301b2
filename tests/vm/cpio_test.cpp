// The cpio newc writer, checked against an independent reader of the format.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "vm/cpio.h"

namespace {

struct Parsed {
    std::uint32_t ino, mode, nlink, mtime, rdevmajor, rdevminor;
    std::string name, data;
};

std::uint32_t hex_field(const std::string& a, std::size_t at) {
    return static_cast<std::uint32_t>(std::stoul(a.substr(at, 8), nullptr, 16));
}

// A reader written from the kernel's buffer-format.rst, not from the writer.
std::vector<Parsed> parse(const std::string& a) {
    std::vector<Parsed> out;
    std::size_t at = 0;
    while (true) {
        REQUIRE(at % 4 == 0);
        REQUIRE(a.size() >= at + 110);
        REQUIRE(a.substr(at, 6) == "070701");
        for (std::size_t i = at + 6; i < at + 110; ++i) {
            char c = a[i];
            REQUIRE(((c >= '0' && c <= '9') || (c >= 'A' && c <= 'F')));
        }
        Parsed p{};
        p.ino = hex_field(a, at + 6);
        p.mode = hex_field(a, at + 14);
        REQUIRE(hex_field(a, at + 22) == 0);  // uid
        REQUIRE(hex_field(a, at + 30) == 0);  // gid
        p.nlink = hex_field(a, at + 38);
        p.mtime = hex_field(a, at + 46);
        std::uint32_t filesize = hex_field(a, at + 54);
        p.rdevmajor = hex_field(a, at + 78);
        p.rdevminor = hex_field(a, at + 86);
        std::uint32_t namesize = hex_field(a, at + 94);
        REQUIRE(hex_field(a, at + 102) == 0);  // check
        p.name = a.substr(at + 110, namesize - 1);
        REQUIRE(a[at + 110 + namesize - 1] == '\0');
        at = (at + 110 + namesize + 3) / 4 * 4;
        p.data = a.substr(at, filesize);
        at = (at + filesize + 3) / 4 * 4;
        out.push_back(p);
        if (p.name == "TRAILER!!!") break;
    }
    REQUIRE(at == a.size());
    return out;
}

}  // namespace

TEST_CASE("cpio writer emits newc headers a reader parses back", "[cpio]") {
    wanlab::vm::CpioWriter w;
    w.add_directory("etc");
    w.add_file("/etc/hello", "hello\n", 0600);
    w.add_symlink("bin/sh", "busybox");
    w.add_char_device("dev/console", 0600, 5, 1);
    auto entries = parse(w.finish());

    REQUIRE(entries.size() == 7);  // etc, etc/hello, bin, bin/sh, dev, dev/console, trailer
    CHECK(entries[0].name == "etc");
    CHECK(entries[0].mode == (S_IFDIR | 0755));
    CHECK(entries[0].nlink == 2);
    CHECK(entries[1].name == "etc/hello");
    CHECK(entries[1].mode == (S_IFREG | 0600));
    CHECK(entries[1].data == "hello\n");
    CHECK(entries[1].nlink == 1);
    CHECK(entries[2].name == "bin");
    CHECK(entries[3].mode == (S_IFLNK | 0777));
    CHECK(entries[3].data == "busybox");
    CHECK(entries[5].mode == (S_IFCHR | 0600));
    CHECK(entries[5].rdevmajor == 5);
    CHECK(entries[5].rdevminor == 1);
    CHECK(entries[6].name == "TRAILER!!!");
    CHECK(entries[6].ino == 0);
    for (std::size_t i = 0; i + 1 < entries.size(); ++i) {
        CHECK(entries[i].ino == i + 1);
        CHECK(entries[i].mtime == 0);
    }
}

TEST_CASE("cpio writer pads names and data to four bytes exactly", "[cpio]") {
    wanlab::vm::CpioWriter w;
    w.add_file("ab", "xyz");  // 110 + 3 = 113 -> 116; data 3 -> 4
    std::string a = w.finish();
    const std::string header =
        "070701"
        "00000001"
        "000081A4"
        "00000000"
        "00000000"
        "00000001"
        "00000000"
        "00000003"
        "00000000"
        "00000000"
        "00000000"
        "00000000"
        "00000003"
        "00000000";
    REQUIRE(a.substr(0, 110) == header);
    CHECK(a.substr(110, 6) == std::string("ab\0\0\0\0", 6));
    CHECK(a.substr(116, 4) == std::string("xyz\0", 4));
    CHECK(a.substr(120, 6) == "070701");
    CHECK(a.size() % 4 == 0);
}

TEST_CASE("cpio writer adds each missing parent directory once", "[cpio]") {
    wanlab::vm::CpioWriter w;
    w.add_file("lib/modules/6.1/kernel/a.ko", "a");
    w.add_file("lib/modules/6.1/kernel/b.ko", "b");
    w.add_directory("lib/modules");  // already there: no second entry
    auto entries = parse(w.finish());
    std::vector<std::string> names;
    for (const auto& e : entries) names.push_back(e.name);
    CHECK(names == std::vector<std::string>{"lib", "lib/modules", "lib/modules/6.1", "lib/modules/6.1/kernel",
                                            "lib/modules/6.1/kernel/a.ko", "lib/modules/6.1/kernel/b.ko",
                                            "TRAILER!!!"});
}

TEST_CASE("cpio writer refuses entries after finish and empty paths", "[cpio]") {
    wanlab::vm::CpioWriter w;
    CHECK_THROWS_WITH(w.add_file("/", "x"), "cpio: an entry needs a non-empty path");
    w.finish();
    CHECK_THROWS_WITH(w.add_file("x", "x"), "cpio: entry added after finish()");
}
