#include "core/sys.h"

#include <fcntl.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"

namespace wanlab::sys {

void fail(std::string_view what, int err) { throw Error(fmt::format("{}: {}", what, std::strerror(err))); }

Fd& Fd::operator=(Fd&& o) noexcept {
    if (this != &o) {
        reset();
        fd_ = o.release();
    }
    return *this;
}

int Fd::release() noexcept {
    int f = fd_;
    fd_ = -1;
    return f;
}

void Fd::reset() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
}

std::string netns_name_problem(std::string_view name) {
    if (name.empty()) return "the name is empty";
    if (name.size() > 255) return "the name is longer than 255 bytes";
    for (unsigned char c : name)
        if (c < 0x20 || c == 0x7f) return "the name contains a control character";
    if (name == "." || name == "..") return "the name is \".\" or \"..\"";
    if (name.find('/') != std::string_view::npos) return "the name contains `/`";
    return "";
}

std::string device_name_problem(std::string_view name) {
    if (name.empty()) return "a device name cannot be empty";
    if (name.size() > 15) return fmt::format("a device name has at most 15 bytes (IFNAMSIZ), not {}", name.size());
    if (name == "." || name == "..") return "a device name cannot be \".\" or \"..\"";
    for (unsigned char c : name) {
        if (c < 0x20 || c == 0x7f) return "a device name cannot contain control characters";
        if (c == '/' || c == ':' || c == ' ')
            return fmt::format("a device name cannot contain `{}`", static_cast<char>(c));
        if (std::isspace(c)) return "a device name cannot contain whitespace";
    }
    return "";
}

std::string netns_path(const std::string& name) {
    if (name.starts_with('/')) {
        // A path mounted elsewhere (/proc/PID/ns/net): any path, but no way back up.
        if (name.find("/../") != std::string::npos || name.ends_with("/..") || name.find('\0') != std::string::npos)
            throw InputError(fmt::format("network namespace path {}: must not contain `..`", name));
        return name;
    }
    if (auto problem = netns_name_problem(name); !problem.empty())
        throw InputError(fmt::format("network namespace name \"{}\": {}", name, problem));
    return fmt::format("{}/{}", kNetnsDir, name);
}

std::string make_service_dir(std::string_view prefix, std::string_view what) {
    std::string dir = fmt::format("/tmp/{}-XXXXXX", prefix);
    if (!::mkdtemp(dir.data())) fail_errno(fmt::format("creating a folder for {} under /tmp", what));
    check_sys(::chmod(dir.c_str(), 0755), "opening " + dir + " to a service's workers");
    return dir;
}

std::string read_tail(const std::string& path, std::size_t max_bytes) {
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW));
    struct stat st {};
    if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return {};
    auto size = static_cast<std::size_t>(st.st_size);
    auto from = size > max_bytes ? size - max_bytes : 0;
    std::string out(size - from, '\0');
    ssize_t n = ::pread(fd.get(), out.data(), out.size(), static_cast<off_t>(from));
    out.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
    return out;
}

std::string read_file(const std::string& path, std::size_t max_bytes, std::string_view what, bool no_follow) {
    auto failed = [&](const std::string& why) { return Error(fmt::format("{} {}: {}", what, path, why)); };
    auto kind = [&](const struct stat& st) {
        if (S_ISDIR(st.st_mode)) throw failed("is a directory, not a file");
        if (!S_ISREG(st.st_mode)) throw failed("is not a regular file (a FIFO, socket or device); give a file");
    };
    // What it is, before anything opens it.
    struct stat seen {};
    if ((no_follow ? ::lstat(path.c_str(), &seen) : ::stat(path.c_str(), &seen)) != 0)
        throw failed(std::strerror(errno));
    if (no_follow && S_ISLNK(seen.st_mode)) throw failed("is a symbolic link, which wanlab does not follow here");
    kind(seen);
    int flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | (no_follow ? O_NOFOLLOW : 0);
    int raw = ::open(path.c_str(), flags);
    if (raw < 0) {
        if (errno == ELOOP && no_follow) throw failed("is a symbolic link, which wanlab does not follow here");
        throw failed(std::strerror(errno));
    }
    Fd fd(raw);
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) throw failed(std::strerror(errno));
    kind(st);
    if (st.st_dev != seen.st_dev || st.st_ino != seen.st_ino) throw failed("changed while it was being opened");
    auto limit = [&] {
        bool mib = max_bytes >= (1u << 20) && max_bytes % (1u << 20) == 0;
        return failed(fmt::format("is larger than {} {}, the most wanlab reads",
                                  mib ? max_bytes >> 20 : max_bytes >> 10, mib ? "MiB" : "KiB"));
    };
    if (static_cast<std::uintmax_t>(st.st_size) > max_bytes) throw limit();
    std::string out;
    char buf[65536];
    for (;;) {
        ssize_t n = ::read(fd.get(), buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw failed(fmt::format("reading: {}", std::strerror(errno)));
        if (n == 0) break;
        out.append(buf, static_cast<std::size_t>(n));
        if (out.size() > max_bytes) throw limit();  // it grew while being read
    }
    return out;
}

void write_file_atomic(const std::string& path, std::string_view data, std::string_view what, mode_t mode) {
    auto failed = [&](const std::string& file, int err) {
        return Error(fmt::format("writing {} {}: {}", what, file, std::strerror(err)));
    };
    std::string tmp;
    Fd fd;
    for (int attempt = 0; !fd && attempt < 100; ++attempt) {
        tmp = fmt::format("{}.tmp-{}-{}", path, ::getpid(), attempt);
        fd = Fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
        if (!fd && errno != EEXIST) throw failed(tmp, errno);
    }
    if (!fd) throw failed(tmp, EEXIST);
    auto discard = [&](int err) {
        ::unlink(tmp.c_str());
        return failed(tmp, err);
    };
    for (std::size_t done = 0; done < data.size();) {
        ssize_t n = ::write(fd.get(), data.data() + done, data.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw discard(errno);
        done += static_cast<std::size_t>(n);
    }
    if (::fchmod(fd.get(), mode) != 0) throw discard(errno);
    if (::close(fd.release()) != 0) throw discard(errno);
    if (::rename(tmp.c_str(), path.c_str()) != 0) throw discard(errno);
}

std::string cannot_create(const std::string& path) {
    auto slash = path.rfind('/');
    std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) return fmt::format("its folder {}: {}", dir, std::strerror(errno));
    if (!S_ISDIR(st.st_mode)) return fmt::format("{} is not a folder", dir);
    if (::access(dir.c_str(), W_OK | X_OK) != 0) return fmt::format("its folder {}: {}", dir, std::strerror(errno));
    if (::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return "it is a folder";
    return "";
}

bool netns_exists(const std::string& name) { return name.empty() || ::access(netns_path(name).c_str(), F_OK) == 0; }

bool is_netns(int fd) { return ::ioctl(fd, NS_GET_NSTYPE) == CLONE_NEWNET; }

Fd open_netns(const std::string& name) {
    std::string what = fmt::format("opening network namespace {}", name);
    Fd ns(static_cast<int>(check_sys(::open(netns_path(name).c_str(), O_RDONLY | O_CLOEXEC), what)));
    // A file that is not a network namespace gets an ordinary error here, before setns().
    if (!is_netns(ns.get())) fail(what, EINVAL);
    return ns;
}

NetnsScope::NetnsScope(const std::string& name) {
    if (name.empty()) return;
    Fd target = open_netns(name);
    saved_ = Fd(static_cast<int>(check_sys(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC),
                                           "opening this thread's network namespace")));
    if (::setns(target.get(), CLONE_NEWNET) != 0) {
        int e = errno;
        saved_.reset();
        fail(fmt::format("entering network namespace {}", name), e);
    }
}

NetnsScope::~NetnsScope() {
    if (saved_ && ::setns(saved_.get(), CLONE_NEWNET) != 0) {
        std::fprintf(stderr, "wanlab: cannot return a thread to its network namespace: %s\n", std::strerror(errno));
        std::abort();
    }
}

void in_netns(const std::string& name, const std::function<void()>& fn) {
    if (name.empty()) {
        fn();
        return;
    }
    Fd target = open_netns(name);
    std::exception_ptr error;
    // setns() moves only the calling thread, so a throwaway thread enters the namespace and
    // the caller's thread (and every other one) stays where it was.
    std::thread worker([&] {
        try {
            check_sys(::setns(target.get(), CLONE_NEWNET), fmt::format("entering network namespace {}", name));
            fn();
        } catch (...) {
            error = std::current_exception();
        }
    });
    worker.join();
    if (error) std::rethrow_exception(error);
}

}  // namespace wanlab::sys
