#include "sysctl/proc_sys.h"

#include <fcntl.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"
#include "core/sys.h"
#include "sysctl/sysctl_spec.h"

namespace wanlab::sysctl {

std::string proc_path(const std::string& key) {
    // The last line of defence for keys from anywhere (a journal, a foreign results file):
    // only a canonical net.* name becomes a path.
    if (!valid_key_syntax(key)) throw Error(fmt::format("`{}` is not a canonical net.* sysctl name", key));
    std::string path = "/proc/sys/" + key;
    std::replace(path.begin() + 10, path.end(), '.', '/');
    return path;
}

std::string where(const std::string& ns) { return ns.empty() ? "on the host" : "in namespace " + ns; }

namespace {

std::optional<std::string> read_file(const std::string& path, const std::string& what) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) return std::nullopt;
    sys::Fd file(static_cast<int>(sys::check_sys(fd, "reading " + what)));
    std::string out;
    char buf[4096];
    for (;;) {
        ssize_t n = ::read(file.get(), buf, sizeof buf);
        if (n == 0) break;
        sys::check_sys(n, "reading " + what);
        out.append(buf, static_cast<std::size_t>(n));
    }
    if (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
}

void write_file(const std::string& path, const std::string& value, const std::string& what) {
    sys::Fd file(static_cast<int>(sys::check_sys(::open(path.c_str(), O_WRONLY | O_CLOEXEC), what)));
    // One write() call: /proc/sys parses the whole value at once.
    ssize_t n = ::write(file.get(), value.data(), value.size());
    sys::check_sys(n, what);
    if (static_cast<std::size_t>(n) != value.size()) sys::fail(what, EIO);
}

}  // namespace

std::optional<std::string> RealProcSys::read(const std::string& ns, const std::string& key) {
    std::string what = fmt::format("{} {}", key, where(ns));
    return sys::in_netns_result(ns, [&] { return read_file(proc_path(key), what); });
}

void RealProcSys::write(const std::string& ns, const std::string& key, const std::string& value) {
    std::string what = fmt::format("setting {} = \"{}\" {}", key, value, where(ns));
    sys::in_netns(ns, [&] { write_file(proc_path(key), value, what); });
}

bool RealProcSys::namespace_exists(const std::string& ns) { return sys::netns_exists(ns); }

}  // namespace wanlab::sysctl
