#include "core/sys.h"

#include <fcntl.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <unistd.h>

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

std::string netns_path(const std::string& name) {
    if (name.starts_with('/')) return name;
    return fmt::format("{}/{}", kNetnsDir, name);
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
