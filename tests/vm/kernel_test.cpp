// Kernel lookup: the version inside a bzImage header, the cache layout, the error messages.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include <fmt/format.h>

#include "core/error.h"
#include "core/proc.h"
#include "vm/files.h"
#include "vm/kernel.h"
#include "vm/qemu.h"
#include "vm/vmlinux.h"

using namespace wanlab::vm;
namespace fs = std::filesystem;

namespace {
// A minimal bzImage-looking blob: "HdrS" at 0x202, version pointer at 0x20E.
std::string fake_bzimage(const std::string& version) {
    std::string img(0x400, '\0');
    img.replace(0x202, 4, "HdrS");
    const unsigned ptr = 0x300 - 0x200;
    img[0x20E] = static_cast<char>(ptr & 0xFF);
    img[0x20F] = static_cast<char>(ptr >> 8);
    img.replace(0x300, version.size() + 30, version + " (builder@host) #1 SMP 2026\0");
    return img;
}

void make_cached_kernel(const fs::path& cache, const std::string& version) {
    fs::create_directories(cache / version / "boot");
    fs::create_directories(cache / version / "lib/modules" / version);
    std::ofstream(cache / version / "boot" / ("vmlinuz-" + version)) << fake_bzimage(version);
    std::ofstream(cache / version / "lib/modules" / version / "modules.dep") << "";
    std::ofstream(cache / version / ".wanlab-complete") << "";
}
}  // namespace

TEST_CASE("bzImage version comes from the setup header", "[kernel]") {
    CHECK(bzimage_version(fake_bzimage("6.1.0-57-amd64")) == "6.1.0-57-amd64");
    CHECK(bzimage_version(std::string(0x400, '\0')).empty());
    CHECK(bzimage_version("short").empty());
}

TEST_CASE("the newest complete cached kernel is chosen", "[kernel]") {
    TempDir tmp(fs::temp_directory_path(), "wanlab-kernel-test-");
    make_cached_kernel(tmp.path(), "6.1.0-9-amd64");
    make_cached_kernel(tmp.path(), "6.1.0-57-amd64");
    fs::create_directories(tmp.path() / "6.1.0-99-amd64");  // incomplete: no marker
    Kernel k = find_kernel(std::nullopt, std::nullopt, tmp.path());
    CHECK(k.version == "6.1.0-57-amd64");
    CHECK(k.image == tmp.path() / "6.1.0-57-amd64/boot/vmlinuz-6.1.0-57-amd64");
    CHECK(k.modules_dir == tmp.path() / "6.1.0-57-amd64/lib/modules/6.1.0-57-amd64");
    CHECK(k.origin == "cache");
}

TEST_CASE("no cached kernel says how to get one", "[kernel]") {
    TempDir tmp(fs::temp_directory_path(), "wanlab-kernel-test-");
    CHECK_THROWS_WITH(find_kernel(std::nullopt, std::nullopt, tmp.path()),
                      Catch::Contains("no kernel for the micro-VM") && Catch::Contains("run `wanlab vm fetch`") &&
                          Catch::Contains("--kernel /boot/vmlinuz-VERSION --modules /lib/modules/VERSION"));
}

TEST_CASE("a kernel given with --kernel finds its modules and rejects a version mismatch", "[kernel]") {
    TempDir tmp(fs::temp_directory_path(), "wanlab-kernel-test-");
    make_cached_kernel(tmp.path(), "6.1.0-57-amd64");
    make_cached_kernel(tmp.path(), "6.1.0-9-amd64");
    const fs::path image = tmp.path() / "6.1.0-57-amd64/boot/vmlinuz-6.1.0-57-amd64";
    Kernel k = find_kernel(image, std::nullopt, "/nonexistent");
    CHECK(k.modules_dir == tmp.path() / "6.1.0-57-amd64/lib/modules/6.1.0-57-amd64");
    CHECK(k.origin == "--kernel");
    CHECK_THROWS_WITH(find_kernel(image, tmp.path() / "6.1.0-9-amd64/lib/modules/6.1.0-9-amd64", "/x"),
                      Catch::Contains("is version 6.1.0-57-amd64 but the modules in"));
    CHECK_THROWS_AS(find_kernel(std::nullopt, fs::path("/lib/modules/x"), "/x"), wanlab::InputError);
    CHECK_THROWS_WITH(find_kernel(tmp.path() / "nope", std::nullopt, "/x"), Catch::Contains("no such file"));
}

TEST_CASE("a bzImage without an xz payload is booted as is", "[kernel][vmlinux]") {
    CHECK_FALSE(extract_vmlinux(fake_bzimage("6.1.0-57-amd64")).has_value());
    CHECK_FALSE(has_pvh_entry("not an elf"));
}

TEST_CASE("a VM folder left by a killed controller is removed by the next, a live one's and a symlink are not",
          "[vm][security]") {
    TempDir parent_dir(fs::temp_directory_path(), "wanlab-left-test-");
    const auto& parent = parent_dir.path();
    const auto me = ::getpid();
    const auto started = wanlab::sys::process_start_time(me);
    auto live = TempDir::owned_by_this_process(parent, "wanlab-vm-");
    const auto dead = parent / fmt::format("wanlab-vm-{}.{}-AbC123", me, started + 1);  // the pid is reused
    fs::create_directory(dead);
    std::ofstream(dead / "argv") << "x";
    fs::create_directory(parent / "elsewhere");
    const auto planted = parent / fmt::format("wanlab-vm-{}.{}-Zz9999", me, started + 2);
    fs::create_directory_symlink(parent / "elsewhere", planted);
    fs::create_directory(parent / "wanlab-vm-notours");
    TempDir::remove_left_behind(parent, "wanlab-vm-");
    CHECK_FALSE(fs::exists(dead));
    CHECK(fs::is_directory(live.path()));
    CHECK(fs::is_symlink(planted));
    CHECK(fs::is_directory(parent / "elsewhere"));
    CHECK(fs::is_directory(parent / "wanlab-vm-notours"));
}

TEST_CASE("a WANLAB_QEMU that names no program is said to be the problem, not a reason to set it", "[vm]") {
    const char* was = std::getenv("WANLAB_QEMU");
    std::string saved = was ? was : "";
    ::setenv("WANLAB_QEMU", "/nonexistent/qemu-system-x86_64", 1);
    CHECK_FALSE(find_qemu());
    auto said = qemu_missing();
    CHECK_THAT(said, Catch::Contains("WANLAB_QEMU=/nonexistent/qemu-system-x86_64 is not a program wanlab can run "
                                     "(No such file or directory)") &&
                         Catch::Contains("or unset it") && !Catch::Contains("set WANLAB_QEMU to its path"));
    ::unsetenv("WANLAB_QEMU");
    CHECK_THAT(qemu_missing(), Catch::Contains("install the Debian package qemu-system-x86"));
    if (was) ::setenv("WANLAB_QEMU", saved.c_str(), 1);
}
