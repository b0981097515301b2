// `wanlab vm fetch` (vm/fetch.h) against a stand-in for apt, dpkg-deb and depmod: which
// package it takes, the cache layout it leaves (one find_kernel() accepts), that a complete
// version is not fetched again, and that a failed step leaves the cache as it was.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "vm/fetch.h"
#include "vm/kernel.h"

using namespace wanlab::vm;
namespace fs = std::filesystem;

namespace {

struct TempDir {
    fs::path path;
    TempDir() {
        std::string t = "/tmp/wanlab-fetch-test-XXXXXX";
        path = ::mkdtemp(t.data());
    }
    ~TempDir() { fs::remove_all(path); }
};

/// apt, dpkg-deb and depmod as far as fetch_kernel() sees them: `version` is what
/// linux-image-amd64 depends on (`after_update` once apt-get update ran), each call logged.
struct FakeApt {
    std::string version = "6.1.0-99-amd64", after_update;
    bool download_fails = false, depmod_fails = false;
    std::vector<std::string> calls;

    CommandResult operator()(const Command& c) {
        std::string line;
        for (const auto& a : c.argv) line += (line.empty() ? "" : " ") + a;
        calls.push_back(line);
        const auto& a = c.argv;
        if (a[0] == "apt-cache")
            return {0,
                    "linux-image-amd64\n |Depends: linux-image-5.10.0-1-amd64\n  Depends: linux-image-" + version +
                        "\n  Recommends: firmware-linux-free\n",
                    ""};
        if (a[0] == "apt-get" && a[1] == "update") {
            if (!after_update.empty()) version = after_update;
            download_fails = false;
            return {0, "", ""};
        }
        if (a[0] == "apt-get") {
            if (download_fails) return {100, "", "E: Failed to fetch http://deb.debian.org/...  404  Not Found"};
            std::ofstream(c.cwd / ("linux-image-" + version + "_6.1.158-1_amd64.deb")) << "deb";
            return {0, "", ""};
        }
        if (a[0] == "dpkg-deb") {
            fs::path root = a[3];
            fs::create_directories(root / "boot");
            fs::create_directories(root / "lib/modules" / version / "kernel/net/sched");
            std::ofstream(root / "boot" / ("vmlinuz-" + version)) << "not a bzImage";
            std::ofstream(root / "lib/modules" / version / "kernel/net/sched/sch_netem.ko") << "ko";
            return {0, "", ""};
        }
        if (a[0] == "depmod") {
            if (depmod_fails) return {1, "", "depmod: ERROR: could not open directory"};
            std::ofstream(fs::path(a[2]) / "lib/modules" / a[3] / "modules.dep") << "kernel/net/sched/sch_netem.ko:\n";
            return {0, "", ""};
        }
        return {127, "", "unknown program"};
    }
};

RunCommand runner(FakeApt& apt) {
    return [&apt](const Command& c) { return apt(c); };
}

std::size_t count_with(const std::vector<std::string>& calls, const std::string& prefix) {
    std::size_t n = 0;
    for (const auto& c : calls) n += c.starts_with(prefix);
    return n;
}

}  // namespace

TEST_CASE("the kernel package is the versioned one linux-image-amd64 depends on, not an alternative", "[vm]") {
    CHECK(kernel_package("linux-image-amd64\n  Depends: linux-image-6.1.0-57-amd64\n") == "linux-image-6.1.0-57-amd64");
    CHECK(
        kernel_package("linux-image-amd64\n |Depends: linux-image-5.10.0-1-amd64\n  Depends: linux-image-6.1.0-9-amd64"
                       "\n") == "linux-image-6.1.0-9-amd64");
    CHECK(kernel_package("linux-image-amd64\n  Depends: linux-image-amd64-signed-template\n").empty());
    CHECK(kernel_package("").empty());
}

TEST_CASE("vm fetch leaves a cached kernel the micro-VM finds, and does not fetch it twice", "[vm]") {
    TempDir cache;
    FakeApt apt;
    FetchOptions o;
    o.cache_dir = cache.path;
    auto f = fetch_kernel(o, runner(apt));
    CHECK(f.version == "6.1.0-99-amd64");
    CHECK(!f.already);
    CHECK(f.dir == cache.path / "6.1.0-99-amd64");
    CHECK(fs::is_regular_file(f.dir / ".wanlab-complete"));
    CHECK(count_with(apt.calls, "apt-get download -qq linux-image-6.1.0-99-amd64") == 1);
    auto k = find_kernel(std::nullopt, std::nullopt, cache.path);
    CHECK(k.version == "6.1.0-99-amd64");
    CHECK(k.image == f.dir / "boot/vmlinuz-6.1.0-99-amd64");
    CHECK(k.modules_dir == f.dir / "lib/modules/6.1.0-99-amd64");
    // Only the version folder is left: no scratch folder of the fetch.
    std::size_t entries = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(cache.path)) ++entries;
    CHECK(entries == 1);

    auto again = fetch_kernel(o, runner(apt));
    CHECK(again.already);
    CHECK(count_with(apt.calls, "apt-get download") == 1);
    CHECK(cached_kernel(o, runner(apt)).already);
}

TEST_CASE("a step that fails names itself and what the program said, and leaves the cache as it was", "[vm]") {
    TempDir cache;
    FakeApt apt;
    apt.depmod_fails = true;
    FetchOptions o;
    o.cache_dir = cache.path;
    CHECK_THROWS_WITH(fetch_kernel(o, runner(apt)), Catch::Contains("indexing the modules") &&
                                                        Catch::Contains("depmod -b ") && Catch::Contains("exit 1") &&
                                                        Catch::Contains("depmod: ERROR: could not open directory"));
    CHECK(fs::is_empty(cache.path));

    FakeApt none;
    none.version = "";  // apt-cache names no versioned package: lists never updated
    CHECK_THROWS_WITH(fetch_kernel(o, runner(none)), Catch::Contains("run `apt-get update` as root"));
    CHECK(count_with(none.calls, "apt-get update") == 0);  // not root: it does not try

    FakeApt old;
    old.download_fails = true;
    CHECK_THROWS_WITH(fetch_kernel(o, runner(old)),
                      Catch::Contains("downloading linux-image-6.1.0-99-amd64 failed: E: Failed to fetch") &&
                          Catch::Contains("apt-get update"));
    CHECK(fs::is_empty(cache.path));
}

TEST_CASE("as root, a download that stale package lists made fail refreshes them and takes the newer kernel", "[vm]") {
    TempDir cache;
    FakeApt apt;
    apt.download_fails = true;
    apt.after_update = "6.1.0-100-amd64";
    FetchOptions o;
    o.cache_dir = cache.path;
    o.root = true;
    auto f = fetch_kernel(o, runner(apt));
    CHECK(f.version == "6.1.0-100-amd64");
    CHECK(count_with(apt.calls, "apt-get update") == 1);
    CHECK(count_with(apt.calls, "apt-get download -qq -o APT::Sandbox::User=root linux-image-6.1.0-100-amd64") == 1);
    std::size_t entries = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(cache.path)) ++entries;
    CHECK(entries == 1);
}
