// The micro-VM's initramfs, built by wanlab itself: busybox-static, the /init script below,
// and the kernel modules the lab needs with their dependencies (resolved through
// modules.dep), as an uncompressed cpio "newc" archive.
//
// Why uncompressed: the kernel unpacks it with a plain copy, so under TCG (where inflating
// 2 MB of gzip costs noticeable emulated CPU time) boot is faster, and wanlab needs no zlib.
// The archive is about 6 MB and lives in a cache folder.
//
// Contract: ensure_initramfs() returns the path of a cached archive for exactly these inputs
// (kernel version, modules.dep, every included file's size and mtime, the module list and
// the /init text), building it on a miss and writing it atomically, so concurrent wanlab
// processes at worst build it twice; a new build removes older archives of the same
// version. Modules named but absent from the kernel are skipped and listed in the result.
// .ko.xz modules are decompressed with liblzma at build time: Debian 12's busybox-static
// insmod does load .ko.xz (tested), but other busybox builds may not, and unpacking once on
// the host beats unpacking under TCG at every boot. Throws wanlab::Error on I/O failures.
//
// The guest side of the protocol (what /init expects from the runner in vm.cpp):
//   9p tag "wanlabctl": control folder; /init reads vm.conf (shell variables WANLAB_OUT) and
//       run.sh (the command), writes `exit` (the command's status) and `oom` (OOM lines)
//       and bind-mounts it at /run/wanlab inside the command's view;
//   9p tag "hostroot": the host's / (read-only); "wanlabout": the --out folder;
//   virtio-serial ports "wanlab.stdout" / "wanlab.stderr": the command's output;
//   console lines "wanlab-init: start", "wanlab-init: done", "wanlab-init: failed: ...".
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "vm/kernel.h"
#include "vm/modules.h"

namespace wanlab::vm {

/// The modules /init loads, in this order (absent ones are tolerated).
const std::vector<std::string>& default_modules();

/// What /init loads from a kernel of `index`: `base` (default_modules()) and every congestion
/// control module the kernel ships (tcp_*), so an experiment may choose any of them in the
/// micro-VM as on a host that loads them on demand. doctor checks against the same list.
std::vector<std::string> guest_modules(const ModuleIndex& index, const std::vector<std::string>& base);

/// The text of /init (busybox sh).
std::string_view init_script();

/// Console markers /init prints.
inline constexpr std::string_view kMarkerStart = "wanlab-init: start";
inline constexpr std::string_view kMarkerDone = "wanlab-init: done";
inline constexpr std::string_view kMarkerFailed = "wanlab-init: failed";

struct InitramfsInputs {
    Kernel kernel;
    std::filesystem::path busybox = "/bin/busybox";
    std::vector<std::string> modules = default_modules();
};

struct Initramfs {
    std::filesystem::path path;
    std::vector<std::string> missing_modules;  // wanted but not in this kernel
    bool from_cache = false;
};

/// The cached archive for `in` under `cache_dir`, built if needed.
Initramfs ensure_initramfs(const InitramfsInputs& in, const std::filesystem::path& cache_dir);

/// Builds the archive bytes (no cache). `missing` receives absent module names.
std::string build_initramfs(const InitramfsInputs& in, std::vector<std::string>& missing);

/// Decompresses an .xz file's bytes; throws wanlab::Error naming `what` on corrupt data.
std::string xz_decompress(std::string_view data, std::string_view what);

/// 64-bit FNV-1a, for cache keys.
std::uint64_t fnv1a64(std::string_view data, std::uint64_t seed = 14695981039346656037ULL);

}  // namespace wanlab::vm
