#include "lab/watchdog.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

extern char** environ;

#include <fmt/format.h>

#include "core/error.h"
#include "core/process.h"
#include "core/sys.h"

namespace wanlab::lab {
namespace {

// From here on only async-signal-safe calls: the parent may have threads.
void nap_ms(long ms) {
    timespec t{ms / 1000, (ms % 1000) * 1'000'000};
    while (::nanosleep(&t, &t) != 0 && errno == EINTR) {}
}

// Nothing happened worth keeping: the log goes, and so does the watchdog.
[[noreturn]] void stand_down(const char* log) {
    if (std::strcmp(log, "/dev/null") != 0) ::unlink(log);
    ::_exit(0);
}

long now_ms() {
    timespec t{};
    ::clock_gettime(CLOCK_MONOTONIC, &t);
    return static_cast<long>(t.tv_sec) * 1000 + t.tv_nsec / 1'000'000;
}

// What the child needs, prepared before fork.
struct Prepared {
    const WatchdogOptions* options;
    pid_t parent;
    bool journal_exists;  ///< the journal was there when the watchdog was armed
    const char* journal;
    const char* log;
    const char* deadline_note;  ///< written to the log when the deadline ends the run
    char* const* argv;
};

// The daemon's body (sys::fork_daemon): `image` is the running wanlab image, opened at arm
// time (see arm_watchdog).
[[noreturn]] void watch(int image, const void* arg) {
    const Prepared& p = *static_cast<const Prepared*>(arg);
    const WatchdogOptions& o = *p.options;
    const pid_t parent = p.parent;
    const long deadline = now_ms() + static_cast<long>(o.seconds) * 1000;
    bool seen = p.journal_exists;
    auto exists = [&p] { return ::access(p.journal, F_OK) == 0; };
    for (;;) {
        if (o.watch_parent) {
            seen = seen || exists();
            if (seen && !exists()) stand_down(p.log);  // the run gave the machine back
            if (::getppid() != parent) {               // it died
                if (!exists()) stand_down(p.log);      // before changing anything, or after giving it back
                break;                                 // killed: its journal is stale now
            }
        }
        if (now_ms() >= deadline) {
            if (!o.watch_parent) break;
            (void)!::write(1, p.deadline_note, std::strlen(p.deadline_note));
            ::kill(parent, SIGTERM);  // it restores itself on SIGTERM
            for (int i = 0; i < 100 && ::getppid() == parent; ++i) nap_ms(100);
            if (::getppid() == parent) {
                ::kill(parent, SIGKILL);
                while (::getppid() == parent) nap_ms(50);
            }
            if (!exists()) ::_exit(0);  // it gave the machine back itself; the log says why it ended
            break;
        }
        nap_ms(100);
    }
    // The image wanlab was started from, even if the file has been rebuilt or deleted since.
    if (image >= 0) ::fexecve(image, p.argv, environ);
    static const char failed[] = "wanlab watchdog: could not start wanlab to restore; run `wanlab restore`\n";
    (void)!::write(2, failed, sizeof failed - 1);
    ::_exit(127);
}

}  // namespace

std::string self_exe() {
    std::error_code ec;
    auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec) throw Error(fmt::format("finding the wanlab binary (/proc/self/exe): {}", ec.message()));
    return p.string();
}

WatchdogOptions run_watchdog(const std::string& run, unsigned seconds, const std::filesystem::path& dir) {
    WatchdogOptions w;
    w.seconds = seconds;
    w.argv = {self_exe(), "restore", run};
    w.watch_parent = true;
    w.journal = dir / (run + ".journal");
    w.log = dir / (run + ".watchdog.log");
    std::filesystem::create_directories(dir);
    return w;
}

pid_t arm_watchdog(const WatchdogOptions& o) {
    // Everything the child needs, prepared before fork. /proc/self/exe opens the image this
    // process runs, not whatever the path names now: a rebuild during a long run leaves it be.
    sys::Fd exe(static_cast<int>(
        sys::check_sys(::open("/proc/self/exe", O_RDONLY | O_CLOEXEC), "opening the wanlab binary (/proc/self/exe)")));
    std::vector<std::string> args = o.argv;
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::string journal = o.journal.string(), log = o.log.empty() ? "/dev/null" : o.log.string();
    pid_t parent = ::getpid();
    bool journal_exists = o.watch_parent && ::access(journal.c_str(), F_OK) == 0;
    std::string note = fmt::format(
        "wanlab watchdog: the --auto-restore deadline of {} s has passed: SIGTERM to wanlab "
        "(pid {}), which gives the machine back\n",
        o.seconds, parent);
    Prepared p{&o, parent, journal_exists, journal.c_str(), log.c_str(), note.c_str(), argv.data()};
    return sys::fork_daemon(o.log.empty() ? "" : log, exe.get(), watch, &p, "starting the --auto-restore watchdog");
}

bool retire_watchdog(pid_t pid, const WatchdogOptions& o) {
    std::error_code ec;
    if (pid <= 0 || std::filesystem::exists(o.journal, ec)) return false;
    ::kill(pid, SIGKILL);
    // It is this process's child: reaped here, so it is gone on return.
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {}
    if (!o.log.empty() && std::filesystem::file_size(o.log, ec) == 0 && !ec) std::filesystem::remove(o.log, ec);
    return true;
}

pid_t RunWatchdog::arm(WatchdogOptions options) {
    retire();
    options_ = std::move(options);
    return pid_ = arm_watchdog(options_);
}

void RunWatchdog::retire() noexcept {
    if (pid_ > 0 && retire_watchdog(pid_, options_)) pid_ = 0;
}

}  // namespace wanlab::lab
