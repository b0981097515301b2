// modules.dep resolution, against text and against a fake modules tree in a temp dir.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <set>

#include "core/error.h"
#include "vm/files.h"
#include "vm/initramfs.h"
#include "vm/modules.h"

using wanlab::vm::module_name;
using wanlab::vm::ModuleIndex;
namespace fs = std::filesystem;

namespace {
constexpr const char* kDep =
    "kernel/drivers/virtio/virtio.ko:\n"
    "kernel/drivers/virtio/virtio_ring.ko:\n"
    "kernel/drivers/virtio/virtio_pci.ko: kernel/drivers/virtio/virtio_pci_modern_dev.ko "
    "kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko\n"
    "kernel/drivers/virtio/virtio_pci_modern_dev.ko:\n"
    "kernel/net/9p/9pnet.ko:\n"
    "kernel/net/9p/9pnet_virtio.ko: kernel/net/9p/9pnet.ko kernel/drivers/virtio/virtio.ko "
    "kernel/drivers/virtio/virtio_ring.ko\n"
    "kernel/fs/netfs/netfs.ko:\n"
    "kernel/fs/fscache/fscache.ko: kernel/fs/netfs/netfs.ko\n"
    "kernel/fs/9p/9p.ko: kernel/net/9p/9pnet.ko kernel/fs/fscache/fscache.ko "
    "kernel/fs/netfs/netfs.ko\n"
    "kernel/net/sched/sch_netem.ko.xz:\n"
    "kernel/drivers/char/hw_random/virtio-rng.ko:\n";
constexpr const char* kBuiltin = "kernel/net/sched/sch_fq_codel.ko\n";

std::size_t index_of(const std::vector<std::string>& v, const std::string& s) {
    auto it = std::find(v.begin(), v.end(), s);
    REQUIRE(it != v.end());
    return static_cast<std::size_t>(it - v.begin());
}
}  // namespace

TEST_CASE("module names drop the folder and extension and treat - as _", "[modules]") {
    CHECK(module_name("kernel/net/sched/sch_netem.ko.xz") == "sch_netem");
    CHECK(module_name("kernel/fs/9p/9p.ko") == "9p");
    CHECK(module_name("virtio-rng") == "virtio_rng");
    CHECK(module_name("a/b/c.ko.zst") == "c");
}

TEST_CASE("modules.dep resolution puts dependencies first, each once", "[modules]") {
    auto index = ModuleIndex::parse(kDep, kBuiltin);
    auto r = index.resolve({"virtio_pci", "9pnet_virtio", "9p"});
    const auto& o = r.load_order;
    CHECK(o.size() == 9);
    CHECK(index_of(o, "kernel/drivers/virtio/virtio.ko") < index_of(o, "kernel/drivers/virtio/virtio_pci.ko"));
    CHECK(index_of(o, "kernel/net/9p/9pnet.ko") < index_of(o, "kernel/net/9p/9pnet_virtio.ko"));
    CHECK(index_of(o, "kernel/fs/netfs/netfs.ko") < index_of(o, "kernel/fs/fscache/fscache.ko"));
    CHECK(index_of(o, "kernel/fs/fscache/fscache.ko") < index_of(o, "kernel/fs/9p/9p.ko"));
    CHECK(r.missing.empty());
    CHECK(r.builtin.empty());
}

TEST_CASE("modules.dep resolution tolerates built-in and absent modules", "[modules]") {
    auto index = ModuleIndex::parse(kDep, kBuiltin);
    auto r = index.resolve({"sch_fq_codel", "sch_cake", "virtio-rng", "sch_netem"});
    CHECK(r.builtin == std::vector<std::string>{"sch_fq_codel"});
    CHECK(r.missing == std::vector<std::string>{"sch_cake"});
    CHECK(r.load_order ==
          std::vector<std::string>{"kernel/drivers/char/hw_random/virtio-rng.ko", "kernel/net/sched/sch_netem.ko.xz"});
}

TEST_CASE("modules.dep parser names the malformed line", "[modules]") {
    CHECK_THROWS_WITH(ModuleIndex::parse("a.ko:\nnot a dep line\n", ""),
                      "modules.dep:2: expected 'path: dependencies', got 'not a dep line'");
}

TEST_CASE("initramfs from a fake modules tree holds busybox, init and the resolved modules", "[modules][initramfs]") {
    wanlab::vm::TempDir tmp(fs::temp_directory_path(), "wanlab-vm-test-");
    const fs::path mods = tmp.path() / "lib/modules/9.9.9-test";
    fs::create_directories(mods / "kernel/net/sched");
    fs::create_directories(mods / "kernel/drivers/virtio");
    std::ofstream(mods / "modules.dep") << "kernel/drivers/virtio/virtio.ko:\n"
                                           "kernel/drivers/virtio/virtio_pci.ko: "
                                           "kernel/drivers/virtio/virtio.ko\n"
                                           "kernel/net/sched/sch_netem.ko:\n";
    std::ofstream(mods / "kernel/drivers/virtio/virtio.ko") << "VIRTIO";
    std::ofstream(mods / "kernel/drivers/virtio/virtio_pci.ko") << "VIRTIO_PCI";
    std::ofstream(mods / "kernel/net/sched/sch_netem.ko") << "NETEM";
    std::ofstream(tmp.path() / "busybox") << "BUSYBOX";

    wanlab::vm::InitramfsInputs in{{tmp.path() / "vmlinuz", mods, "9.9.9-test", "test"},
                                   tmp.path() / "busybox",
                                   {"virtio_pci", "sch_netem", "sch_nonexistent"}};
    std::vector<std::string> missing;
    std::string archive = wanlab::vm::build_initramfs(in, missing);
    CHECK(missing == std::vector<std::string>{"sch_nonexistent"});
    CHECK(archive.find("BUSYBOX") != std::string::npos);
    CHECK(archive.find("NETEM") != std::string::npos);
    CHECK(archive.find("kernel/drivers/virtio/virtio.ko\n"
                       "kernel/drivers/virtio/virtio_pci.ko\n"
                       "kernel/net/sched/sch_netem.ko\n") != std::string::npos);
    CHECK(archive.find(std::string(wanlab::vm::init_script())) != std::string::npos);

    auto cached = wanlab::vm::ensure_initramfs(in, tmp.path() / "cache");
    CHECK_FALSE(cached.from_cache);
    CHECK(fs::file_size(cached.path) == archive.size());
    CHECK(wanlab::vm::ensure_initramfs(in, tmp.path() / "cache").from_cache);

    in.modules = {"virtio_pci"};  // other inputs: a new archive replaces the old one
    auto rebuilt = wanlab::vm::ensure_initramfs(in, tmp.path() / "cache");
    CHECK_FALSE(rebuilt.from_cache);
    CHECK(rebuilt.path != cached.path);
    CHECK_FALSE(fs::exists(cached.path));
    CHECK(fs::exists(rebuilt.path));
}

TEST_CASE("a guest offers the congestion controls and qdiscs built in or loaded, and nothing it does not load",
          "[modules]") {
    // As Debian 12's kernel: cubic built in; bbr, htcp and netem loadable; no bbr2 at all.
    auto index = ModuleIndex::parse(
        "kernel/net/ipv4/tcp_bbr.ko.xz:\nkernel/net/ipv4/tcp_htcp.ko.xz:\nkernel/net/sched/sch_netem.ko.xz:\n"
        "kernel/net/sched/sch_cake.ko.xz:\n",
        "kernel/net/ipv4/tcp_cubic.ko\nkernel/net/sched/sch_fq_codel.ko\n");
    auto o = wanlab::vm::offered(index, {"tcp_bbr", "tcp_bbr2", "sch_netem", "virtio_pci"});
    CHECK(o.congestion_controls == std::set<std::string>{"bbr", "cubic", "reno"});
    CHECK(o.qdiscs == std::set<std::string>{"bfifo", "fq_codel", "netem", "pfifo", "pfifo_fast", "pfifo_head_drop"});
    CHECK_FALSE(o.congestion_controls.count("htcp"));  // on disk, but not among those loaded
    CHECK_FALSE(o.qdiscs.count("cake"));
    // The micro-VM loads every congestion control its kernel ships: htcp too, still no bbr2.
    auto guest = wanlab::vm::guest_modules(index, {"sch_netem", "tcp_bbr"});
    CHECK(guest == std::vector<std::string>{"sch_netem", "tcp_bbr", "tcp_htcp"});
    o = wanlab::vm::offered(index, guest);
    CHECK(o.congestion_controls == std::set<std::string>{"bbr", "cubic", "htcp", "reno"});
}
