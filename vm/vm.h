// wanlab::vm: run commands as root in a throwaway QEMU micro-VM that boots a stock kernel
// (real sch_netem on hosts whose kernel lacks it) and sees the host's files read-only.
//
// Contract: Vm's constructor finds QEMU, the kernel and the (cached) initramfs, and picks the
// accelerator (possibly one short KVM probe boot, whose verdict is cached); it throws
// wanlab::Error with what to do when any of them is missing. run() boots one VM, runs the
// command in it (cwd kept when visible, stdin /dev/null), copies its stdout/stderr live to the
// given descriptors (or, with VmOptions::terminal, gives it this terminal, whose settings are
// put back afterwards however the run ends), and returns when the VM is gone. Every wait is bounded: boot by
// boot_timeout, the command by timeout (exit status 124), power-off by a grace period. A
// SIGINT/SIGTERM/SIGHUP during run() kills the VM and yields 128 + the signal's number (130
// for SIGINT). Nothing survives run(): QEMU is killed and reaped, the control folder
// removed. One run() at a time.
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "vm/accel.h"
#include "vm/initramfs.h"
#include "vm/kernel.h"
#include "vm/qemu.h"

namespace wanlab::vm {

struct VmOptions {
    std::optional<std::filesystem::path> kernel;   // --kernel; default: the fetched one
    std::optional<std::filesystem::path> modules;  // --modules
    unsigned memory_mib = 1024;
    unsigned cpus = 0;                             // 0: as many as the host has, at most 4
    std::chrono::seconds timeout{0};               // command limit after boot; 0: none
    std::chrono::seconds boot_timeout{90};         // from QEMU start to the command starting
    std::optional<std::filesystem::path> out_dir;  // writable share at the same path
    std::optional<Accel> accel;                    // forced; default from WANLAB_VM_ACCEL
    bool verbose = false;                          // copy the guest console to stderr
    /// Give the command this process's terminal (stdin and stdout must be one) as its
    /// controlling tty: its input, output and Ctrl-C, the size it had at the start. The
    /// command's stdout and stderr are then that terminal, not out_fd and err_fd.
    bool terminal = false;
};

struct RunResult {
    int exit_status = 0;  // the command's; 124 after --timeout, 128+N after signal N
    bool timed_out = false;
    bool interrupted = false;
    bool out_of_memory = false;
    std::string oom_report;      // the guest kernel's OOM lines
    double boot_seconds = 0;     // QEMU start -> command start
    double command_seconds = 0;  // command start -> command end
    double total_seconds = 0;    // QEMU start -> QEMU gone
};

class Vm {
public:
    explicit Vm(VmOptions options);

    /// Runs argv (argv[0] looked up in the guest's PATH). out_fd/err_fd < 0 discard.
    RunResult run(const std::vector<std::string>& argv, int out_fd = 1, int err_fd = 2);

    const Kernel& kernel() const noexcept { return kernel_; }
    const Initramfs& initramfs() const noexcept { return initramfs_; }
    /// What QEMU's -kernel gets: the cached vmlinux (PVH entry) or the bzImage.
    const std::filesystem::path& boot_image() const noexcept { return boot_image_; }
    const std::filesystem::path& qemu() const noexcept { return qemu_; }
    const AccelChoice& accel() const noexcept { return accel_; }
    unsigned cpus() const noexcept;

private:
    bool probe_kvm();
    /// The QEMU command line of one run: `ctl` the control folder, `out_dir` --out or "".
    QemuSpec qemu_spec(const std::filesystem::path& ctl, const std::string& out_dir) const;

    VmOptions options_;
    std::filesystem::path qemu_;
    Kernel kernel_;
    Initramfs initramfs_;
    std::filesystem::path boot_image_;
    AccelChoice accel_;
};

/// The run.sh the guest executes: environment, cwd, then `exec argv`.
std::string guest_script(const std::vector<std::string>& argv, const std::string& cwd);

/// 'text' quoted for sh (single quotes; embedded ' as '\'').
std::string shell_quote(std::string_view text);

/// Folder for the initramfs and verdict caches: <cache_root()>/vm.
std::filesystem::path vm_cache_dir();

/// What the micro-VM lacks on this machine to boot (QEMU, a kernel in the cache or the one
/// given, busybox), each with the command that fixes it; empty when it can boot. Reads only.
std::vector<std::string> missing_parts(const std::optional<std::filesystem::path>& kernel = std::nullopt,
                                       const std::optional<std::filesystem::path>& modules = std::nullopt);

/// The accelerator `vm run` would use with this QEMU and guest kernel, from what is known
/// now (WANLAB_VM_ACCEL, /dev/kvm, a cached verdict); never boots: without a verdict, it
/// says the first `vm run` probes.
AccelChoice expected_accel(const std::filesystem::path& qemu, const std::string& kernel_version);

}  // namespace wanlab::vm
