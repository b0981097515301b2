#include "core/sys.h"

#include <cstring>
#include <exception>
#include <fcntl.h>
#include <sched.h>
#include <thread>
#include <unistd.h>

#include <fmt/format.h>

#include "core/error.h"

namespace wanlab::sys {

void fail(std::string_view what, int err) { throw Error(fmt::format("{}: {}", what, std::strerror(err))); }

std::string netns_path(const std::string& ns) { return "/run/netns/" + ns; }

Fd::~Fd() {
    if (fd_ >= 0) ::close(fd_);
}

Fd& Fd::operator=(Fd&& o) noexcept {
    if (this != &o) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = o.release();
    }
    return *this;
}

void in_netns(const std::string& ns, const std::function<void()>& fn) {
    if (ns.empty()) {
        fn();
        return;
    }
    Fd target(static_cast<int>(check_sys(::open(netns_path(ns).c_str(), O_RDONLY | O_CLOEXEC),
                                         fmt::format("opening network namespace {}", ns))));
    std::exception_ptr error;
    // setns() moves only the calling thread, so a throwaway thread enters the namespace and
    // the caller's thread (and every other one) stays where it was.
    std::thread worker([&] {
        try {
            check_sys(::setns(target.get(), CLONE_NEWNET), fmt::format("entering network namespace {}", ns));
            fn();
        } catch (...) {
            error = std::current_exception();
        }
    });
    worker.join();
    if (error) std::rethrow_exception(error);
}

}  // namespace wanlab::sys
