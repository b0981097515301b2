#include "vm/fetch.h"

#include <cctype>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/error.h"
#include "core/text.h"
#include "vm/files.h"

namespace wanlab::vm {

namespace fs = std::filesystem;

namespace {

constexpr const char* kMeta = "linux-image-amd64";
constexpr const char* kMarker = ".wanlab-complete";

/// The last lines of what a program printed, for an error message.
std::string last_lines(const CommandResult& r) {
    auto tail = text::tail_lines(r.err.empty() ? r.out : r.err, 3);
    return tail.empty() ? "no output" : tail;
}

CommandResult must(const RunCommand& run, const Command& c, const std::string& step) {
    auto r = run(c);
    if (r.exit_code != 0)
        throw Error(fmt::format("{}: `{}` failed ({}): {}", step, fmt::join(c.argv, " "),
                                r.exit_code < 0 ? "did not exit by itself" : fmt::format("exit {}", r.exit_code),
                                last_lines(r)));
    return r;
}

std::string resolve(const FetchOptions& o, const RunCommand& run) {
    auto pkg = kernel_package(run({{"apt-cache", "depends", kMeta}, {}}).out);
    if (pkg.empty() && o.root) {  // a fresh machine: apt has no package lists yet
        if (o.log) o.log("apt has no package lists yet; running apt-get update");
        must(run, {{"apt-get", "update", "-qq"}, {}}, "refreshing apt's package lists");
        pkg = kernel_package(run({{"apt-cache", "depends", kMeta}, {}}).out);
    }
    if (pkg.empty())
        throw Error(
            fmt::format("apt-cache knows no `{}`: run `apt-get update` as root, then `wanlab vm fetch` again", kMeta));
    return pkg;
}

}  // namespace

std::string kernel_package(const std::string& apt_cache_depends) {
    std::istringstream in(apt_cache_depends);
    for (std::string line; std::getline(in, line);) {
        auto w = text::words(line);  // "  Depends: linux-image-6.1.0-57-amd64" (not "|Depends:", an alternative)
        if (w.size() >= 2 && w[0] == "Depends:" && w[1].starts_with("linux-image-") && w[1].size() > 12 &&
            std::isdigit(static_cast<unsigned char>(w[1][12])))
            return w[1];
    }
    return "";
}

Fetched cached_kernel(const FetchOptions& o, const RunCommand& run) {
    auto pkg = resolve(o, run);
    Fetched f;
    f.version = pkg.substr(std::string("linux-image-").size());
    f.dir = o.cache_dir / f.version;
    std::error_code ec;
    f.already = fs::is_regular_file(f.dir / kMarker, ec);
    return f;
}

namespace {

Fetched fetch(const FetchOptions& o, const RunCommand& run, bool retried) {
    auto f = cached_kernel(o, run);
    if (f.already) {
        if (o.log) o.log(fmt::format("{} is already in {}", f.version, f.dir.string()));
        return f;
    }
    const std::string pkg = "linux-image-" + f.version;
    fs::create_directories(o.cache_dir);
    TempDir work(o.cache_dir, fmt::format(".fetch-{}.", f.version));  // gone whatever happens
    if (o.log) o.log(fmt::format("downloading {} (about 70 MB)", pkg));
    // apt-get download writes into its working folder and needs no root. As root, apt drops
    // privileges to _apt, which cannot enter a 0700 home folder: it downloads as root there.
    std::vector<std::string> download{"apt-get", "download", "-qq"};
    if (o.root) download.insert(download.end(), {"-o", "APT::Sandbox::User=root"});
    download.push_back(pkg);
    if (auto r = run({download, work.path()}); r.exit_code != 0) {
        // Stale lists name a version the archive no longer has: refreshed once (as root).
        if (!o.root || retried)
            throw Error(
                fmt::format("downloading {} failed: {}; if apt's package lists are old, run `apt-get update` "
                            "as root and `wanlab vm fetch` again",
                            pkg, last_lines(r)));
        if (o.log) o.log("the download failed; refreshing apt's package lists and retrying");
        must(run, {{"apt-get", "update", "-qq"}, {}}, "refreshing apt's package lists");
        return fetch(o, run, true);
    }
    fs::path deb;
    for (const auto& e : fs::directory_iterator(work.path()))
        if (e.path().filename().string().starts_with(pkg + "_") && e.path().extension() == ".deb") deb = e.path();
    if (deb.empty()) throw Error(fmt::format("apt-get download left no {}_*.deb in {}", pkg, work.path().string()));

    if (o.log) o.log(fmt::format("unpacking into {}", f.dir.string()));
    const auto root = work.path() / "root";
    fs::create_directory(root);
    must(run, {{"dpkg-deb", "-x", deb.string(), root.string()}, {}}, "unpacking " + deb.filename().string());
    if (!fs::is_regular_file(root / "boot" / ("vmlinuz-" + f.version)))
        throw Error(fmt::format("{} holds no boot/vmlinuz-{}", deb.filename().string(), f.version));
    const auto modules = root / "lib" / "modules" / f.version;
    if (!fs::is_directory(modules))
        throw Error(fmt::format("{} holds no lib/modules/{}", deb.filename().string(), f.version));
    must(run, {{"depmod", "-b", root.string(), f.version}, {}}, "indexing the modules");
    std::error_code ec;
    if (fs::file_size(modules / "modules.dep", ec) == 0 || ec)
        throw Error(fmt::format("depmod wrote no modules.dep in {}", modules.string()));
    std::ofstream(root / kMarker).flush();

    fs::remove_all(f.dir, ec);  // an incomplete one, without the marker
    fs::rename(root, f.dir);
    if (o.log) o.log(fmt::format("ready: {}", (f.dir / "boot" / ("vmlinuz-" + f.version)).string()));
    return f;
}

}  // namespace

Fetched fetch_kernel(const FetchOptions& o, const RunCommand& run) { return fetch(o, run, false); }

}  // namespace wanlab::vm
