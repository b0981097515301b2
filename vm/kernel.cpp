#include "vm/kernel.h"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "vm/files.h"

namespace wanlab::vm {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kFetchHint =
    "run `wanlab vm fetch` (downloads Debian's stock kernel into {}), or pass "
    "--kernel /boot/vmlinuz-VERSION --modules /lib/modules/VERSION";

std::string read_prefix(const fs::path& path, std::size_t bytes) {
    std::ifstream in(path, std::ios::binary);
    if (!in) sys::fail_errno("reading kernel image " + path.string());
    std::string buf(bytes, '\0');
    in.read(buf.data(), static_cast<std::streamsize>(bytes));
    buf.resize(static_cast<std::size_t>(in.gcount()));
    return buf;
}

void require_modules_dir(const fs::path& dir) {
    if (!fs::is_directory(dir)) throw InputError(fmt::format("--modules {}: not a directory", dir.string()));
    if (!fs::exists(dir / "modules.dep"))
        throw InputError(
            fmt::format("{} has no modules.dep; run depmod -b ROOT VERSION "
                        "(ROOT being the folder above lib/modules)",
                        dir.string()));
}

Kernel from_user(const fs::path& image, const std::optional<fs::path>& modules) {
    if (!fs::is_regular_file(image)) throw InputError(fmt::format("--kernel {}: no such file", image.string()));
    std::string image_version = bzimage_version(read_prefix(image, 64 * 1024));
    fs::path dir;
    if (modules) {
        dir = *modules;
    } else if (image_version.empty()) {
        throw InputError(fmt::format("cannot tell the version of {}; pass --modules DIR", image.string()));
    } else {
        // The cache layout (…/boot/vmlinuz-V next to …/lib/modules/V), then the host's.
        dir = image.parent_path().parent_path() / "lib/modules" / image_version;
        if (!fs::exists(dir / "modules.dep")) dir = fs::path("/lib/modules") / image_version;
        if (!fs::exists(dir / "modules.dep"))
            throw InputError(
                fmt::format("no modules for {} (looked in {}); pass --modules DIR", image_version, dir.string()));
    }
    require_modules_dir(dir);
    fs::path norm = fs::absolute(dir).lexically_normal();
    if (!norm.has_filename()) norm = norm.parent_path();
    std::string version = norm.filename().string();
    if (!image_version.empty() && image_version != version)
        throw InputError(
            fmt::format("kernel {} is version {} but the modules in {} are for {}; "
                        "pass matching --kernel and --modules",
                        image.string(), image_version, dir.string(), version));
    return Kernel{image, dir, version, "--kernel"};
}

Kernel from_cache(const fs::path& cache_dir) {
    std::vector<std::string> versions;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(cache_dir, ec))
        if (fs::exists(entry.path() / ".wanlab-complete")) versions.push_back(entry.path().filename().string());
    if (versions.empty())
        throw Error(fmt::format("no kernel for the micro-VM in {}: {}", cache_dir.string(),
                                fmt::format(fmt::runtime(kFetchHint), cache_dir.string())));
    std::string newest = versions.front();
    for (const auto& v : versions)
        if (::strverscmp(v.c_str(), newest.c_str()) > 0) newest = v;
    fs::path root = cache_dir / newest;
    Kernel k{root / "boot" / ("vmlinuz-" + newest), root / "lib/modules" / newest, newest, "cache"};
    if (!fs::is_regular_file(k.image) || !fs::exists(k.modules_dir / "modules.dep"))
        throw Error(fmt::format("the cached kernel in {} is incomplete; delete it and {}", root.string(),
                                fmt::format(fmt::runtime(kFetchHint), cache_dir.string())));
    return k;
}

}  // namespace

std::string bzimage_version(std::string_view image) {
    if (image.size() < 0x210 || image.substr(0x202, 4) != "HdrS") return {};
    auto lo = static_cast<unsigned char>(image[0x20E]);
    auto hi = static_cast<unsigned char>(image[0x20F]);
    std::size_t offset = 0x200 + (static_cast<std::size_t>(hi) << 8 | lo);
    if (offset >= image.size()) return {};
    std::string_view rest = image.substr(offset);
    auto end = rest.find_first_of(std::string_view(" \0", 2));
    if (end == std::string_view::npos || end == 0) return {};
    return std::string(rest.substr(0, end));
}

fs::path kernel_cache_dir() {
    if (const char* dir = std::getenv("WANLAB_KERNEL_CACHE"); dir != nullptr && *dir != '\0') return dir;
    return cache_root() / "kernel";
}

Kernel find_kernel(const std::optional<fs::path>& image, const std::optional<fs::path>& modules,
                   const fs::path& cache_dir) {
    if (image) return from_user(*image, modules);
    if (modules) throw InputError("--modules needs --kernel (the image those modules belong to)");
    return from_cache(cache_dir);
}

}  // namespace wanlab::vm
