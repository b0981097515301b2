// Which kernel the micro-VM boots: the user's choice (--kernel/--modules) or the newest one
// `wanlab vm fetch` (vm/fetch.h) unpacked into the cache.
//
// Contract: find_kernel() returns an image that exists and a modules directory holding
// modules.dep, whose version (the directory's name) agrees with the version string inside the
// image when the image has one; otherwise it throws wanlab::Error / InputError saying what to
// run or pass. Reads the file system only; thread-compatible.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace wanlab::vm {

struct Kernel {
    std::filesystem::path image;        // bzImage, e.g. .../boot/vmlinuz-6.1.0-57-amd64
    std::filesystem::path modules_dir;  // e.g. .../lib/modules/6.1.0-57-amd64
    std::string version;                // "6.1.0-57-amd64"
    std::string origin;                 // "cache" or "--kernel"
};

/// The release string in an x86 bzImage's setup header ("6.1.0-57-amd64"), or "" when the
/// bytes are not a bzImage with a version (header "HdrS" at 0x202, pointer at 0x20E).
std::string bzimage_version(std::string_view image_prefix);

/// Where `wanlab vm fetch` unpacks kernels: $WANLAB_KERNEL_CACHE, else
/// ${XDG_CACHE_HOME:-$HOME/.cache}/wanlab/kernel.
std::filesystem::path kernel_cache_dir();

/// Picks the kernel: `image` and `modules` as given (modules guessed from the image's version
/// when absent), else the newest complete version under `cache_dir`.
Kernel find_kernel(const std::optional<std::filesystem::path>& image,
                   const std::optional<std::filesystem::path>& modules, const std::filesystem::path& cache_dir);

}  // namespace wanlab::vm
