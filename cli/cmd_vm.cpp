// `wanlab vm run|info|fetch`: the front end of vm/ (see vm/vm.h for what a run does, vm/fetch.h
// for where its kernel comes from).
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/command.h"
#include "core/error.h"
#include "core/process.h"
#include "core/signals.h"
#include "vm/fetch.h"
#include "vm/files.h"
#include "vm/kernel.h"
#include "vm/vm.h"

namespace wanlab::cli {

namespace {

struct VmArgs {
    std::string kernel, modules, out, accel;
    unsigned memory_mib = 1024;
    unsigned cpus = 0;
    double timeout_s = 0;
    double boot_timeout_s = 90;
    bool verbose = false;
    bool stats = false;
    bool tty = false;
    std::vector<std::string> command;
};

void add_machine_options(CLI::App& app, VmArgs& a) {
    app.add_option("--kernel", a.kernel,
                   "Kernel image (bzImage) to boot; default: the newest one `wanlab vm fetch` "
                   "put in ~/.cache/wanlab/kernel");
    app.add_option("--modules", a.modules, "That kernel's modules folder (/lib/modules/VERSION, with modules.dep)");
    app.add_option("--accel", a.accel, "kvm or tcg (default: $WANLAB_VM_ACCEL, else probe)")
        ->check(CLI::IsMember({"kvm", "tcg"}));
}

vm::VmOptions to_options(const VmArgs& a) {
    vm::VmOptions o;
    if (!a.kernel.empty()) o.kernel = a.kernel;
    if (!a.modules.empty()) o.modules = a.modules;
    if (!a.out.empty()) o.out_dir = a.out;
    if (!a.accel.empty()) o.accel = vm::parse_accel(a.accel, "--accel");
    o.memory_mib = a.memory_mib;
    o.cpus = a.cpus;
    o.timeout = std::chrono::seconds(static_cast<long long>(a.timeout_s + 0.999));
    o.boot_timeout = std::chrono::seconds(static_cast<long long>(a.boot_timeout_s + 0.999));
    o.verbose = a.verbose;
    o.terminal = a.tty;
    return o;
}

int run_vm(const VmArgs& a) {
    vm::Vm machine(to_options(a));
    if (!machine.initramfs().missing_modules.empty() && a.verbose)
        std::fprintf(stderr, "wanlab: this kernel has no %s\n",
                     fmt::format("{}", fmt::join(machine.initramfs().missing_modules, ", ")).c_str());
    vm::RunResult r = machine.run(a.command);
    if (a.stats)
        std::fprintf(stderr, "wanlab: vm %s: boot %.2f s, command %.2f s, total %.2f s, exit %d\n",
                     vm::accel_name(machine.accel().accel), r.boot_seconds, r.command_seconds, r.total_seconds,
                     r.exit_status);
    if (r.timed_out)
        std::fprintf(stderr, "wanlab: error: the command ran over --timeout %g s; VM killed\n", a.timeout_s);
    if (r.interrupted) std::fputs("wanlab: interrupted; VM killed and cleaned up\n", stderr);
    if (r.out_of_memory)
        std::fprintf(stderr,
                     "wanlab: %s: the guest ran out of memory (its OOM killer fired); give "
                     "the VM more with --memory (now %u MiB). Guest kernel said:\n%s",
                     r.exit_status == 0 ? "warning" : "error", a.memory_mib, r.oom_report.c_str());
    return r.exit_status;
}

/// vm/fetch.h's programs, run here: found on PATH (or named with the package to install), their
/// output in files (apt-get download writes into its working folder), Ctrl-C honoured.
vm::RunCommand host_commands(sys::SignalEvents& signals) {
    return [&signals](const vm::Command& c) {
        auto argv = c.argv;
        argv[0] = sys::find_tool(argv[0]);  // its package from core/tools.h
        vm::TempDir dir("/tmp", "wanlab-fetch-");
        const auto& logs = dir.path();
        vm::CommandResult r;
        {
            sys::Process p("", argv,
                           {logs / "out", logs / "err", c.cwd.empty() ? std::filesystem::current_path() : c.cwd});
            auto o = p.wait(std::chrono::minutes(30), [&signals] { signals.check(); });
            r.exit_code = sys::exited_ok(o) ? 0 : (WIFEXITED(o.status) ? WEXITSTATUS(o.status) : -1);
        }
        auto slurp = [](const std::filesystem::path& f) {
            std::ostringstream s;
            s << std::ifstream(f).rdbuf();
            return s.str();
        };
        r.out = slurp(logs / "out");
        r.err = slurp(logs / "err");
        return r;
    };
}

int fetch_vm(bool print) {
    sys::SignalEvents signals;
    vm::FetchOptions o;
    o.cache_dir = vm::kernel_cache_dir();
    o.root = ::geteuid() == 0;
    o.log = [](const std::string& line) { std::fprintf(stderr, "wanlab: vm fetch: %s\n", line.c_str()); };
    auto run = host_commands(signals);
    if (print) {  // where the kernel is, for scripts; 1 when it is not there yet
        auto f = vm::cached_kernel(o, run);
        if (!f.already) return 1;
        fmt::print("{}\n", f.dir.string());
        return 0;
    }
    vm::fetch_kernel(o, run);
    return 0;
}

std::vector<std::string> vm_missing(const VmArgs& a) {
    return vm::missing_parts(a.kernel.empty() ? std::nullopt : std::optional<std::filesystem::path>(a.kernel),
                             a.modules.empty() ? std::nullopt : std::optional<std::filesystem::path>(a.modules));
}

int info_vm(const VmArgs& a) {
    if (auto missing = vm_missing(a); !missing.empty()) {
        fmt::print("the micro-VM cannot boot here yet; missing:\n");
        for (const auto& m : missing) fmt::print("  {}\n", m);
        return 1;
    }
    vm::Vm machine(to_options(a));
    const auto& k = machine.kernel();
    fmt::print("kernel:     {} ({}, from {})\n", k.image.string(), k.version, k.origin);
    fmt::print("modules:    {}\n", k.modules_dir.string());
    fmt::print("initramfs:  {}{}\n", machine.initramfs().path.string(),
               machine.initramfs().from_cache ? "" : " (built now)");
    if (!machine.initramfs().missing_modules.empty())
        fmt::print("not in this kernel: {}\n", fmt::join(machine.initramfs().missing_modules, ", "));
    fmt::print("qemu:       {}\n", machine.qemu().string());
    fmt::print("accel:      {}\n", machine.accel().reason);
    fmt::print("cpus:       {}\n", machine.cpus());
    fmt::print("caches:     {} (kernels), {} (initramfs, KVM verdict)\n", vm::kernel_cache_dir().string(),
               vm::vm_cache_dir().string());
    return 0;
}

}  // namespace

Runner setup_vm(CLI::App& sub) {
    auto a = std::make_shared<VmArgs>();
    sub.require_subcommand(1);
    CLI::App* run = sub.add_subcommand("run",
                                       "Boot a micro-VM, run COMMAND as root inside (host files read-only, /tmp and "
                                       "/run writable), exit with its status");
    add_machine_options(*run, *a);
    run->add_option("--memory", a->memory_mib, "Guest memory in MiB")
        ->capture_default_str()
        ->check(CLI::Range(128u, 65536u));
    run->add_option("--cpus", a->cpus, "Guest CPUs (default: host CPUs, at most 4)")->check(CLI::Range(1u, 64u));
    run->add_option("--timeout", a->timeout_s,
                    "Kill the VM when the command runs longer than this many seconds "
                    "(exit 124); default: no limit")
        ->check(CLI::NonNegativeNumber);
    run->add_option("--boot-timeout", a->boot_timeout_s,
                    "Give up when the command has not started this many seconds after QEMU did")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    run->add_option("--out", a->out, "A writable folder, shared into the VM at the same path (created if missing)");
    run->add_flag("-v,--verbose", a->verbose, "Copy the guest console (boot messages) to stderr");
    run->add_flag("--stats", a->stats, "Print boot and command times to stderr");
    run->add_flag("-t,--tty", a->tty,
                  "Give COMMAND this terminal, as ssh -t does: its input, Ctrl-C, and its output and errors "
                  "(an interactive shell: wanlab vm run -t -- bash)");
    // CLI11 reads an argument such as "[root]" as a bracketed list and strips it, so the
    // command after `--` is taken from argv untouched by main() (command_after_dashdash()).
    run->add_option("command", a->command, "The command and its arguments (after --)")->required();
    CLI::App* info = sub.add_subcommand("info", "Show the kernel, initramfs, QEMU and accelerator `vm run` would use");
    add_machine_options(*info, *a);
    auto print = std::make_shared<bool>(false);
    CLI::App* fetch = sub.add_subcommand(
        "fetch",
        "Download Debian's stock kernel for the micro-VM into the kernel cache (apt-get download, never "
        "installed); again only when linux-image-amd64 moved to a newer one");
    fetch->add_flag("--print", *print, "Print the cached kernel's folder (exit 1 when it is not there yet)");
    return [a, run, info, fetch, print]() -> int {
        if (fetch->parsed()) return fetch_vm(*print);
        if (run->parsed()) {
            if (const auto& raw = command_after_dashdash(); !raw.empty()) a->command = raw;
            return run_vm(*a);
        }
        if (info->parsed()) return info_vm(*a);
        return 2;
    };
}

}  // namespace wanlab::cli
