#include "vm/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "core/proc.h"
#include "core/sys.h"

namespace wanlab::vm {

namespace fs = std::filesystem;

TempDir::TempDir(const fs::path& parent, std::string_view prefix) {
    std::string pattern = (parent / (std::string(prefix) + "XXXXXX")).string();
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) == nullptr) sys::fail_errno("creating a temporary directory " + pattern);
    path_ = buf.data();
}

TempDir TempDir::owned_by_this_process(const fs::path& parent, std::string_view prefix) {
    return TempDir(parent, fmt::format("{}{}.{}-", prefix, ::getpid(), sys::process_start_time(::getpid())));
}

void TempDir::remove_left_behind(const fs::path& parent, std::string_view prefix) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(parent, ec)) {
        auto name = e.path().filename().string();
        if (!name.starts_with(prefix)) continue;
        unsigned long long pid = 0, start = 0;
        char tail[16] = {};
        if (std::sscanf(name.c_str() + prefix.size(), "%llu.%llu-%15s", &pid, &start, tail) != 3 || pid == 0 ||
            pid > 4194304 || std::strlen(tail) != 6)
            continue;
        struct stat st {};
        if (::lstat(e.path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) continue;
        if (sys::process_running(static_cast<pid_t>(pid), start)) continue;
        fs::remove_all(e.path(), ec);
    }
}

TempDir::~TempDir() {
    if (path_.empty()) return;
    std::error_code ec;
    fs::remove_all(path_, ec);
    if (ec) std::fprintf(stderr, "wanlab: warning: removing %s: %s\n", path_.c_str(), ec.message().c_str());
}

std::string read_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) sys::fail_errno("reading " + path.string());
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) throw Error(fmt::format("reading {}: I/O error", path.string()));
    return std::move(ss).str();
}

void write_file_atomic(const fs::path& path, std::string_view data) {
    sys::write_file_atomic(path.string(), data, "the file");
}

void prune_cache(const fs::path& dir, std::string_view prefix, const fs::path& keep) noexcept {
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name.starts_with(prefix) && it->path() != keep) fs::remove(it->path(), ec);
    }
}

fs::path cache_root() {
    if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg == '/') return fs::path(xdg) / "wanlab";
    const char* home = std::getenv("HOME");
    if (home == nullptr || *home == '\0')
        throw Error(
            "neither XDG_CACHE_HOME nor HOME is set; set one so wanlab can cache "
            "the VM kernel and initramfs");
    return fs::path(home) / ".cache" / "wanlab";
}

}  // namespace wanlab::vm
