#include "vm/vm.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"
#include "core/process.h"
#include "core/signals.h"
#include "core/tools.h"
#include "vm/files.h"
#include "vm/vmlinux.h"

namespace wanlab::vm {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::size_t kConsoleLinesKept = 30;
constexpr auto kPoweroffGrace = std::chrono::seconds(10);
constexpr auto kProbeBootTimeout = std::chrono::seconds(20);

void write_all(int fd, std::string_view data) {
    while (fd >= 0 && !data.empty()) {
        ssize_t n = ::write(fd, data.data(), data.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;  // EPIPE etc.: the reader is gone; keep draining the VM
        data.remove_prefix(static_cast<std::size_t>(n));
    }
}

double seconds_between(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
}

/// The guest console: kept line by line (last 30) for error messages, scanned for /init's
/// markers, copied to stderr with --verbose, and, when the guest has no virtio ports, the
/// command's output between the markers goes to out_fd.
class Console {
public:
    Console(bool verbose, int out_fd) : verbose_(verbose), out_fd_(out_fd) {}

    void feed(std::string_view data) {
        for (char c : data) {
            if (c == '\r') continue;
            if (c != '\n') {
                if (partial_.size() < 4096) partial_.push_back(c);
                continue;
            }
            line(partial_);
            partial_.clear();
        }
    }
    void flush() {
        if (!partial_.empty()) line(partial_);
        partial_.clear();
    }

    bool started() const noexcept { return started_; }
    bool done() const noexcept { return done_; }
    const std::string& failure() const noexcept { return failure_; }
    Clock::time_point start_time() const noexcept { return start_time_; }
    Clock::time_point done_time() const noexcept { return done_time_; }

    std::string last_lines() const {
        std::string out;
        for (const auto& l : lines_) out += "  | " + l + "\n";
        return out.empty() ? "  (nothing: the kernel prints errors only; run with -v to see "
                             "the whole boot)\n"
                           : out;
    }
    bool mentions(std::string_view text) const {
        return std::any_of(lines_.begin(), lines_.end(), [&](const std::string& l) { return l.find(text) != l.npos; });
    }

private:
    void line(const std::string& l) {
        if (verbose_) write_all(2, "[vm] " + l + "\n");
        if (started_ && !done_ && console_mode_ && l.find(kMarkerDone) == l.npos) {
            write_all(out_fd_, l + "\n");
            return;
        }
        lines_.push_back(l);
        if (lines_.size() > kConsoleLinesKept) lines_.pop_front();
        if (auto at = l.find(kMarkerStart); at != l.npos && !started_) {
            started_ = true;
            start_time_ = Clock::now();
            console_mode_ = l.find("console", at) != l.npos;
        } else if (l.find(kMarkerDone) != l.npos && !done_) {
            done_ = true;
            done_time_ = Clock::now();
        } else if (auto f = l.find(kMarkerFailed); f != l.npos && failure_.empty()) {
            failure_ = l.substr(f);
        }
    }

    bool verbose_;
    int out_fd_;
    std::string partial_;
    std::deque<std::string> lines_;
    bool started_ = false, done_ = false, console_mode_ = false;
    std::string failure_;
    Clock::time_point start_time_{}, done_time_{};
};

/// Reads what is available on `fd` (non-blocking). Returns false at EOF or error.
bool read_some(int fd, std::string& into) {
    char buf[65536];
    while (true) {
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n > 0) {
            into.assign(buf, static_cast<std::size_t>(n));
            return true;
        }
        if (n < 0 && errno == EINTR) continue;
        into.clear();
        return n < 0 && errno == EAGAIN;
    }
}

void set_nonblocking(int fd) {
    int flags = static_cast<int>(check_sys(::fcntl(fd, F_GETFL), "fcntl F_GETFL"));
    check_sys(::fcntl(fd, F_SETFL, flags | O_NONBLOCK), "fcntl F_SETFL");
}

std::string qemu_failure(int status, const std::string& stderr_text) {
    std::string how = WIFEXITED(status) ? fmt::format("exit status {}", WEXITSTATUS(status))
                                        : fmt::format("signal {}", WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    std::string text = stderr_text.empty() ? std::string("(nothing on stderr)") : stderr_text;
    while (!text.empty() && text.back() == '\n') text.pop_back();
    return fmt::format("QEMU ended ({}): {}", how, text);
}

/// The --out folder as an absolute path, created if missing ("" without --out); throws
/// InputError when it is not a usable directory or is "/".
std::string usable_out_dir(const std::optional<fs::path>& out) {
    if (!out) return "";
    std::error_code ec;
    fs::create_directories(*out, ec);
    fs::path abs = fs::weakly_canonical(fs::absolute(*out), ec);
    if (ec || !fs::is_directory(abs)) throw InputError(fmt::format("--out {}: not a usable directory", out->string()));
    if (abs == "/") throw InputError("--out /: refusing to share the whole file system");
    return abs.string();
}

/// The control folder the guest's /init reads: run.sh (the command, in this cwd) and
/// vm.conf (where --out is shared).
void write_control_files(const fs::path& ctl, const std::vector<std::string>& argv, const std::string& out_dir,
                         const std::optional<winsize>& tty) {
    std::error_code ec;
    std::string cwd = fs::current_path(ec).string();
    write_file_atomic(ctl / "run.sh", guest_script(argv, cwd.empty() ? "/" : cwd));
    std::string conf = fmt::format("WANLAB_OUT={}\n", shell_quote(out_dir));
    if (tty && tty->ws_row > 0 && tty->ws_col > 0)
        conf += fmt::format("WANLAB_TTY_ROWS={}\nWANLAB_TTY_COLS={}\n", tty->ws_row, tty->ws_col);
    write_file_atomic(ctl / "vm.conf", conf);
}

/// This process's terminal settings, put back when it goes out of scope: QEMU restores what
/// its raw mode changed when it exits, but not when it is killed.
class TerminalSettings {
public:
    TerminalSettings() {
        if (::tcgetattr(0, &saved_) != 0)
            throw InputError("vm run: a terminal for the command needs one on stdin (it is not a terminal)");
        if (!::isatty(1)) throw InputError("vm run: a terminal for the command needs one on stdout (it is redirected)");
        if (::ioctl(0, TIOCGWINSZ, &size_) != 0) size_ = {};
    }
    ~TerminalSettings() {
        sys::give_terminal(0, ::getpgrp());  // QemuRun gave it back; this holds if it could not
        ::tcsetattr(0, TCSADRAIN, &saved_);
    }
    TerminalSettings(const TerminalSettings&) = delete;
    TerminalSettings& operator=(const TerminalSettings&) = delete;
    const winsize& size() const noexcept { return size_; }

private:
    termios saved_{};
    winsize size_{};
};

/// How waiting for QEMU ended.
struct Ending {
    int status = 0;  // QEMU's wait status
    bool boot_timed_out = false;
    bool timed_out = false;    // the command outlived --timeout
    bool interrupted = false;  // by SIGINT, SIGTERM or SIGHUP: `signal_number`
    int signal_number = 0;
};

/// QEMU running one command, and the four pipes it writes: the guest console (to a
/// Console), its own stderr (the first 64 KiB kept for errors), the command's stdout and
/// stderr (copied to out_fd and err_fd). SIGINT, SIGTERM and SIGHUP are events while it
/// lives. Starts QEMU in the constructor; wait() returns once QEMU is reaped, killing it at
/// a deadline or on a signal; the ChildProcess's destructor kills and reaps it otherwise.
class QemuRun {
public:
    QemuRun(const QemuSpec& spec, bool verbose, int out_fd, int err_fd)
        : qemu_(qemu_argv(spec), child_fds(spec.terminal), "QEMU"), con_(verbose, out_fd), out_fd_(out_fd),
          err_fd_(err_fd), terminal_(spec.terminal) {
        for (Pipe* p : {&console_, &qerr_, &out_, &err_}) {
            p->write.reset();
            set_nonblocking(p->read.get());
        }
        // QEMU reads the terminal and sets its modes: from its own process group, that needs
        // the terminal's foreground, or the kernel stops it (SIGTTIN, SIGTTOU). A stop that
        // came first is undone by the SIGCONT.
        if (terminal_) {
            sys::give_terminal(0, qemu_.pid());
            ::kill(-qemu_.pid(), SIGCONT);
        }
    }
    ~QemuRun() {
        if (terminal_) sys::give_terminal(0, ::getpgrp());
    }
    QemuRun(const QemuRun&) = delete;
    QemuRun& operator=(const QemuRun&) = delete;

    /// Waits until QEMU is gone: killed at the deadline of the phase it is in (boot, command,
    /// power-off) or on a signal; then reads what the pipes still hold.
    Ending wait(std::chrono::seconds boot_timeout, std::chrono::seconds timeout) {
        Ending end;
        std::optional<int> status;
        while (!status) {
            auto deadline = phase_deadline(boot_timeout, timeout), now = Clock::now();
            if (now >= deadline) {
                end.boot_timed_out = !con_.started();
                end.timed_out = con_.started() && !con_.done();
                status = qemu_.kill_and_reap();
                break;
            }
            status = poll_once(deadline - now, end);
        }
        for (int i = 0; i < 4; ++i) drain(i);
        con_.flush();
        end.status = *status;
        return end;
    }

    Clock::time_point started() const noexcept { return t0_; }
    const Console& console() const noexcept { return con_; }
    const std::string& qemu_stderr() const noexcept { return qemu_stderr_; }

private:
    /// QEMU's descriptors: the console on its stdout, or, when it has the terminal on its
    /// stdio (QemuSpec::terminal), on fd 5 (QemuSpec::console_fd).
    std::vector<std::pair<int, int>> child_fds(bool terminal) const {
        if (terminal)
            return {{0, 0},
                    {1, 1},
                    {qerr_.write.get(), 2},
                    {out_.write.get(), 3},
                    {err_.write.get(), 4},
                    {console_.write.get(), 5}};
        return {{devnull_.get(), 0},
                {console_.write.get(), 1},
                {qerr_.write.get(), 2},
                {out_.write.get(), 3},
                {err_.write.get(), 4}};
    }

    /// The deadline of the current phase: boot, command, or power-off.
    Clock::time_point phase_deadline(std::chrono::seconds boot_timeout, std::chrono::seconds timeout) const {
        if (!con_.started()) return t0_ + boot_timeout;
        if (con_.done()) return con_.done_time() + kPoweroffGrace;
        if (timeout.count() > 0) return con_.start_time() + timeout;
        return Clock::time_point::max();
    }

    /// One poll of the open pipes, the signals and QEMU's exit, for at most `left`. QEMU's
    /// wait status once it is gone, else nullopt.
    std::optional<int> poll_once(Clock::duration left, Ending& end) {
        auto wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(left);
        const long long cap_ms = qemu_.exit_fd() >= 0 ? 1000 : 100;  // no pidfd: poll waitpid
        int timeout_ms = static_cast<int>(std::min<long long>(wait_ms.count() + 1, cap_ms));
        pollfd pfd[6];
        int n = 0;
        int index_of[6];
        for (int i = 0; i < 4; ++i)
            if (open_[i]) {
                index_of[n] = i;
                pfd[n++] = {read_fd(i), POLLIN, 0};
            }
        const int sig_at = n;
        pfd[n++] = {signals_.fd(), POLLIN, 0};
        const int exit_at = qemu_.exit_fd() >= 0 ? n : -1;
        if (exit_at >= 0) pfd[n++] = {qemu_.exit_fd(), POLLIN, 0};
        if (::poll(pfd, static_cast<nfds_t>(n), timeout_ms) < 0) {
            if (errno == EINTR) return std::nullopt;
            check_sys(-1, "waiting for the VM (poll)");
        }
        for (int k = 0; k < sig_at; ++k)
            if (pfd[k].revents != 0) drain(index_of[k]);
        if (pfd[sig_at].revents != 0) return on_signal(end);
        if (exit_at < 0 || pfd[exit_at].revents != 0) return qemu_.try_reap();
        return std::nullopt;
    }

    /// A signal is pending: QEMU is killed, and its wait status returned.
    std::optional<int> on_signal(Ending& end) {
        // Consume it: left pending, it would kill us once the mask is restored.
        auto signo = signals_.wait(std::chrono::milliseconds(0));
        if (!signo) return std::nullopt;
        end.interrupted = true;
        end.signal_number = *signo;
        return qemu_.kill_and_reap();
    }

    int read_fd(int i) const {
        const Pipe* pipes[4] = {&console_, &qerr_, &out_, &err_};
        return pipes[i]->read.get();
    }

    /// Reads pipe `i` (0 console, 1 QEMU's stderr, 2 stdout, 3 stderr) until it is empty or closed.
    void drain(int i) {
        while (open_[i]) {
            if (!read_some(read_fd(i), chunk_)) {
                open_[i] = false;
                break;
            }
            if (chunk_.empty()) break;
            if (i == 0) con_.feed(chunk_);
            if (i == 1 && qemu_stderr_.size() < 65536) qemu_stderr_ += chunk_;
            if (i == 2) write_all(out_fd_, chunk_);
            if (i == 3) write_all(err_fd_, chunk_);
        }
    }

    Pipe console_ = make_pipe(), qerr_ = make_pipe(), out_ = make_pipe(), err_ = make_pipe();
    Fd devnull_{static_cast<int>(check_sys(::open("/dev/null", O_RDONLY | O_CLOEXEC), "opening /dev/null"))};
    sys::SignalEvents signals_;  // SIGPIPE is ignored process-wide (cli/main.cpp)
    const Clock::time_point t0_ = Clock::now();
    sys::ChildProcess qemu_;
    Console con_;
    int out_fd_, err_fd_;
    std::string qemu_stderr_, chunk_;
    bool open_[4] = {true, true, true, true};
    bool terminal_;
};

/// A RunResult with how the wait ended and the time each phase took, up to `end_time`.
RunResult timed_result(const Ending& end, const Console& con, Clock::time_point t0, Clock::time_point end_time) {
    RunResult result;
    result.timed_out = end.timed_out;
    result.interrupted = end.interrupted;
    result.total_seconds = seconds_between(t0, end_time);
    if (con.started()) {
        result.boot_seconds = seconds_between(t0, con.start_time());
        result.command_seconds = seconds_between(con.start_time(), con.done() ? con.done_time() : end_time);
    }
    return result;
}

Error boot_timeout_error(std::chrono::seconds boot_timeout, Accel accel, const Console& con) {
    return Error(
        fmt::format("the VM did not finish booting within {} s (accelerator {}){}.\n"
                    "Last console lines:\n{}",
                    boot_timeout.count(), accel_name(accel),
                    accel == Accel::kvm ? "; KVM guests hang on some hosts: try WANLAB_VM_ACCEL=tcg"
                                        : "; the machine may be overloaded: raise --boot-timeout",
                    con.last_lines()));
}

/// The guest never started the command: its /init's own failure, or QEMU's.
Error stopped_in_boot(const Console& con, int status, const std::string& qemu_stderr) {
    if (!con.failure().empty())
        return Error(
            fmt::format("the VM's init stopped: {}.\nLast console lines:\n{}", con.failure(), con.last_lines()));
    return Error(fmt::format("the VM stopped during boot. {}\nLast console lines:\n{}",
                             qemu_failure(status, qemu_stderr), con.last_lines()));
}

/// The command's exit status and OOM report, as the guest left them in the control folder
/// `ctl`; throws when the VM stopped before the command finished.
void read_guest_exit(const fs::path& ctl, unsigned memory_mib, const QemuRun& qemu, int status, RunResult& result) {
    const fs::path exit_file = ctl / "exit";
    if (!fs::exists(exit_file)) {
        bool oom = qemu.console().mentions("Out of memory");
        throw Error(fmt::format("the VM stopped before the command finished{}.\n{}\nLast console lines:\n{}",
                                oom ? fmt::format(": the guest ran out of memory; give it more with --memory "
                                                  "(now {} MiB)",
                                                  memory_mib)
                                    : "",
                                qemu_failure(status, qemu.qemu_stderr()), qemu.console().last_lines()));
    }
    std::string text = read_file(exit_file);
    result.exit_status = std::atoi(text.c_str());
    if (fs::exists(ctl / "oom")) result.oom_report = read_file(ctl / "oom");
    result.out_of_memory = !result.oom_report.empty();
}

}  // namespace

std::string shell_quote(std::string_view text) {
    std::string out = "'";
    for (char c : text) {
        if (c == '\'')
            out += "'\\''";
        else
            out.push_back(c);
    }
    return out + "'";
}

std::string guest_script(const std::vector<std::string>& argv, const std::string& cwd) {
    std::string s =
        "# written by wanlab vm run; executed by the guest's /init\n"
        "export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"
        "export HOME=/root USER=root LOGNAME=root\n";
    for (const char* name : {"TERM", "LANG", "LC_ALL", "TZ"})
        if (const char* v = std::getenv(name); v != nullptr) s += fmt::format("export {}={}\n", name, shell_quote(v));
    s += fmt::format("cd {} 2>/dev/null || cd /\nexec", shell_quote(cwd));
    for (const auto& a : argv) s += " " + shell_quote(a);
    return s + "\n";
}

fs::path vm_cache_dir() { return cache_root() / "vm"; }

Vm::Vm(VmOptions options) : options_(std::move(options)) {
    auto qemu = find_qemu();
    if (!qemu) throw Error(qemu_missing());
    qemu_ = *qemu;
    kernel_ = find_kernel(options_.kernel, options_.modules, kernel_cache_dir());
    if (!fs::exists("/bin/busybox"))
        throw Error("/bin/busybox not found; install the Debian package " + sys::debian_package("busybox"));
    InitramfsInputs in{kernel_};
    initramfs_ = ensure_initramfs(in, vm_cache_dir());
    boot_image_ = vm::boot_image(kernel_, vm_cache_dir());
    if (!options_.accel)
        if (const char* env = std::getenv("WANLAB_VM_ACCEL"); env != nullptr && *env != '\0')
            options_.accel = parse_accel(env, "WANLAB_VM_ACCEL");
    const fs::path verdict = kvm_verdict_file(vm_cache_dir(), qemu_, kernel_.version);
    AccelInputs ai{options_.accel, options_.accel ? false : kvm_device_usable(), read_kvm_verdict(verdict)};
    accel_ = choose_accel(
        ai, [this] { return probe_kvm(); }, [&verdict](bool works) { write_kvm_verdict(verdict, works); });
}

unsigned Vm::cpus() const noexcept {
    if (options_.cpus != 0) return options_.cpus;
    unsigned host = std::thread::hardware_concurrency();
    return std::clamp(host, 1u, 4u);
}

std::vector<std::string> missing_parts(const std::optional<fs::path>& kernel, const std::optional<fs::path>& modules) {
    std::vector<std::string> out;
    if (!find_qemu()) out.push_back("QEMU: " + qemu_missing());
    try {
        (void)find_kernel(kernel, modules, kernel_cache_dir());
    } catch (const Error& e) {
        out.push_back(fmt::format("kernel: {}", e.what()));
    }
    if (!fs::exists("/bin/busybox"))
        out.push_back("busybox: /bin/busybox is not installed: apt-get install " + sys::debian_package("busybox"));
    return out;
}

AccelChoice expected_accel(const fs::path& qemu, const std::string& kernel_version) {
    std::optional<Accel> forced;
    if (const char* env = std::getenv("WANLAB_VM_ACCEL"); env != nullptr && *env != '\0')
        forced = parse_accel(env, "WANLAB_VM_ACCEL");
    AccelInputs in{forced, forced ? false : kvm_device_usable(),
                   read_kvm_verdict(kvm_verdict_file(vm_cache_dir(), qemu, kernel_version))};
    bool unknown = false;
    auto choice = choose_accel(
        in, [&unknown] { return unknown = true; }, [](bool) {});
    if (unknown)
        choice.reason = "kvm: /dev/kvm answers; the first `wanlab vm run` probes it with one short boot (cached)";
    return choice;
}

bool Vm::probe_kvm() {
    std::fputs("wanlab: probing KVM with a short boot (once; the verdict is cached)\n", stderr);
    VmOptions saved = options_;
    AccelChoice saved_accel = accel_;
    options_.boot_timeout = kProbeBootTimeout;
    options_.timeout = std::chrono::seconds(10);
    options_.out_dir.reset();
    options_.terminal = false;
    accel_ = {Accel::kvm, "probe"};
    bool works = false;
    try {
        works = run({"true"}, -1, -1).exit_status == 0;
    } catch (const Error& e) {
        std::fprintf(stderr, "wanlab: KVM probe failed; using TCG. %s\n", std::string(e.what()).substr(0, 300).c_str());
    }
    options_ = saved;
    accel_ = saved_accel;
    return works;
}

QemuSpec Vm::qemu_spec(const fs::path& ctl, const std::string& out_dir) const {
    QemuSpec spec;
    spec.qemu = qemu_;
    spec.accel = accel_.accel;
    spec.kernel = boot_image_;
    spec.initrd = initramfs_.path;
    spec.append = kernel_append(options_.verbose);
    if (const char* extra = std::getenv("WANLAB_VM_APPEND"); extra != nullptr && *extra != '\0')
        spec.append += std::string(" ") + extra;  // debugging: e.g. "loglevel=7 printk.time=1"
    spec.memory_mib = options_.memory_mib;
    spec.cpus = cpus();
    spec.shares = {{"wanlabctl", ctl, false}, {"hostroot", "/", true}};
    if (!out_dir.empty()) spec.shares.push_back({"wanlabout", out_dir, false});
    spec.stdout_fd = 3;
    spec.stderr_fd = 4;
    if (options_.terminal) {
        spec.terminal = true;
        spec.console_fd = 5;
    }
    return spec;
}

RunResult Vm::run(const std::vector<std::string>& argv, int out_fd, int err_fd) {
    if (argv.empty()) throw InputError("vm run: no command given");
    // A controller killed mid-run left its folder: the next one removes it.
    TempDir::remove_left_behind(fs::temp_directory_path(), "wanlab-vm-");
    std::optional<TerminalSettings> terminal;
    if (options_.terminal) terminal.emplace();
    auto ctl = TempDir::owned_by_this_process(fs::temp_directory_path(), "wanlab-vm-");
    std::string out_dir = usable_out_dir(options_.out_dir);
    write_control_files(ctl.path(), argv, out_dir,
                        terminal ? std::optional<winsize>(terminal->size()) : std::optional<winsize>());
    QemuRun qemu(qemu_spec(ctl.path(), out_dir), options_.verbose, out_fd, err_fd);
    Ending end = qemu.wait(options_.boot_timeout, options_.timeout);
    RunResult result = timed_result(end, qemu.console(), qemu.started(), Clock::now());
    if (result.interrupted) {
        result.exit_status = 128 + end.signal_number;  // as a shell reports it: SIGINT 130
        return result;
    }
    if (end.boot_timed_out) throw boot_timeout_error(options_.boot_timeout, accel_.accel, qemu.console());
    if (result.timed_out) {
        result.exit_status = 124;
        return result;
    }
    if (!qemu.console().started()) throw stopped_in_boot(qemu.console(), end.status, qemu.qemu_stderr());
    read_guest_exit(ctl.path(), options_.memory_mib, qemu, end.status, result);
    return result;
}

}  // namespace wanlab::vm
