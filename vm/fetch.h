// `wanlab vm fetch`: Debian's stock kernel for the micro-VM, downloaded with apt and unpacked
// into the kernel cache (kernel.h's kernel_cache_dir()). Nothing is installed: no /boot, no
// dpkg database, no initramfs hooks.
//
// Contract: fetch_kernel() resolves the package linux-image-amd64 depends on
// (linux-image-<version>), and leaves <cache>/<version>/ complete, as find_kernel() takes it
// (boot/vmlinuz-<version>, lib/modules/<version>/ with modules.dep from depmod, and the
// marker .wanlab-complete), or the cache as it was: it unpacks into a temporary folder in the
// cache and renames it into place last. A complete version is not fetched again. The external
// programs (apt-cache, apt-get, dpkg-deb, depmod) run through `run`, so the steps are tested
// without the archive. Errors throw wanlab::Error with the step and the program's last lines.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace wanlab::vm {

struct Command {
    std::vector<std::string> argv;  ///< argv[0]: the program's name, looked up on PATH
    std::filesystem::path cwd;      ///< "" = wanlab's own
};
struct CommandResult {
    int exit_code = -1;  ///< -1: did not exit by itself
    std::string out, err;
};
using RunCommand = std::function<CommandResult(const Command&)>;

/// The package `apt-cache depends linux-image-amd64` names ("linux-image-6.1.0-57-amd64"),
/// "" when its output names none.
std::string kernel_package(const std::string& apt_cache_depends);

struct FetchOptions {
    std::filesystem::path cache_dir;  ///< kernel_cache_dir()
    bool root = false;                ///< running as root: apt may refresh its lists, downloads as root
    std::function<void(const std::string&)> log;
};

struct Fetched {
    std::string version;        ///< "6.1.0-57-amd64"
    std::filesystem::path dir;  ///< <cache>/<version>
    bool already = false;       ///< it was complete before: nothing downloaded
};

/// The version linux-image-amd64 depends on, fetched unless complete in the cache.
Fetched fetch_kernel(const FetchOptions& options, const RunCommand& run);
/// The version apt would fetch and whether it is complete in the cache, without downloading
/// (`wanlab vm fetch --print`, `vm info`); throws if apt knows no such package.
Fetched cached_kernel(const FetchOptions& options, const RunCommand& run);

}  // namespace wanlab::vm
