#include "lab/netns.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#include <cstdio>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"
#include "core/proc.h"
#include "core/sys.h"
#include "core/text.h"
#include "lab/journal.h"

namespace wanlab::lab {
namespace {

// Steps 1-3 of `ip netns add` (iproute2 ip/ipnetns.c): /run/netns exists and is a shared
// mount, so unmounting a namespace file also unmounts it in the mount namespaces that
// `ip netns exec` creates, and the namespace can actually be freed.
void prepare_netns_dir() {
    const std::string dir(sys::kNetnsDir);
    const char* d = dir.c_str();
    if (::mkdir(d, 0755) != 0 && errno != EEXIST) sys::fail("creating " + dir, errno);
    sys::Fd lock(static_cast<int>(sys::check_sys(::open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC), "opening " + dir)));
    sys::check_sys(::flock(lock.get(), LOCK_EX), "locking " + dir);
    bool bound = false;
    while (::mount("", d, "none", MS_SHARED | MS_REC, nullptr) != 0) {
        if (errno != EINVAL || bound) sys::fail("making " + dir + " a shared mount", errno);
        sys::check_sys(::mount(d, d, "none", MS_BIND | MS_REC, nullptr), "bind-mounting " + dir);
        bound = true;
    }
}

// Steps 4-7: a fresh namespace on a throwaway thread, bind-mounted onto /run/netns/NAME.
void make_namespace(const std::string& name) {
    std::string path = sys::netns_path(name);
    int fd = ::open(path.c_str(), O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0);
    if (fd < 0 && errno == EEXIST)
        throw Error(fmt::format(
            "network namespace {} exists already (a leftover? `wanlab restore` or `ip netns del {}`)", name, name));
    ::close(static_cast<int>(sys::check_sys(fd, fmt::format("creating {}", path))));
    int err = 0;
    std::string step;
    std::thread worker([&] {
        // unshare() moves only this thread; it ends right after, so nothing else runs there.
        if (::unshare(CLONE_NEWNET) != 0) {
            err = errno, step = "creating a network namespace";
        } else if (::mount("/proc/thread-self/ns/net", path.c_str(), "none", MS_BIND, nullptr) != 0) {
            err = errno, step = fmt::format("bind-mounting the new namespace on {}", path);
        }
    });
    worker.join();
    if (err != 0) {
        ::unlink(path.c_str());
        sys::fail(step, err);
    }
}

}  // namespace

NetNamespace::NetNamespace(std::string name, Journal* journal) : name_(std::move(name)), journal_(journal) {
    prepare_netns_dir();
    // Checked before journaling, so a restore never deletes a namespace that is not ours.
    if (exists(name_)) {
        std::string taken = std::move(name_);
        name_.clear();
        throw Error(fmt::format(
            "network namespace {} exists already (a leftover? `wanlab restore` or `ip netns del {}`)", taken, taken));
    }
    if (journal_) journal_->record(netns_entry(name_));
    try {
        make_namespace(name_);
    } catch (...) {
        name_.clear();  // nothing of ours to remove; the journal entry is harmless (idempotent)
        throw;
    }
}

NetNamespace::~NetNamespace() {
    if (name_.empty()) return;
    try {
        remove(name_);
    } catch (const std::exception& e) {
        std::fputs(fmt::format("wanlab: warning: {}\n", text::terminal_safe(e.what())).c_str(), stderr);
        if (journal_) journal_->keep();
    }
}

bool NetNamespace::exists(const std::string& name) { return !name.empty() && sys::netns_exists(name); }

void NetNamespace::remove(const std::string& name) {
    std::string path = sys::netns_path(name);
    // A process left inside (a service's child that left its group, a tool of a killed run)
    // would keep the namespace, and its devices, alive after the unmount: it goes first.
    auto inside = sys::netns_processes(path);
    for (pid_t p : inside) ::kill(p, SIGKILL);
    if (!sys::wait_gone(inside, 2000).empty())
        throw Error(fmt::format("processes in network namespace {} survived SIGKILL (`ip netns pids {}`)", name, name));
    if (::umount2(path.c_str(), MNT_DETACH) != 0 && errno != EINVAL && errno != ENOENT)
        sys::fail(fmt::format("unmounting network namespace {}", name), errno);
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) sys::fail(fmt::format("removing {}", path), errno);
}

}  // namespace wanlab::lab
