#include "vm/qemu.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "core/text.h"
#include "core/tools.h"

namespace wanlab::vm {

namespace fs = std::filesystem;

const char* accel_name(Accel accel) noexcept { return accel == Accel::kvm ? "kvm" : "tcg"; }

std::string qemu_escape(const std::string& value) {
    std::string out;
    for (char c : value) {
        out.push_back(c);
        if (c == ',') out.push_back(',');
    }
    return out;
}

std::string kernel_append(bool verbose) {
    // quiet: only errors reach the console; panic=-1 with -no-reboot turns a guest panic into
    // QEMU exiting; i8042.* and 8250.nr_uarts skip probing hardware that is not there.
    return fmt::format(
        "console=ttyS0 {} panic=-1 rdinit=/init i8042.noaux i8042.nomux "
        "i8042.nopnp i8042.dumbkbd 8250.nr_uarts=1 tsc=reliable no_timer_check",
        verbose ? "loglevel=7" : "quiet");
}

namespace {

void add_port(std::vector<std::string>& argv, int fd, const char* id, const char* name) {
    if (fd < 0) return;
    argv.insert(argv.end(), {"-chardev", fmt::format("file,id={},path=/proc/self/fd/{},append=on", id, fd), "-device",
                             fmt::format("virtserialport,bus=wanlabser.0,chardev={},name={}", id, name)});
}

}  // namespace

std::vector<std::string> qemu_argv(const QemuSpec& spec) {
    std::vector<std::string> argv = {spec.qemu.string(), "-nodefaults", "-no-user-config",
                                     "-display",         "none",        "-no-reboot"};
    if (spec.accel == Accel::kvm)
        argv.insert(argv.end(), {"-accel", "kvm", "-cpu", "max"});
    else
        argv.insert(argv.end(), {"-accel", "tcg,thread=multi"});
    argv.insert(argv.end(), {"-m", std::to_string(spec.memory_mib), "-smp", std::to_string(spec.cpus), "-kernel",
                             spec.kernel.string(), "-initrd", spec.initrd.string(), "-append", spec.append});
    if (spec.console_fd >= 0)
        argv.insert(argv.end(),
                    {"-chardev", fmt::format("file,id=console,path=/proc/self/fd/{},append=on", spec.console_fd),
                     "-serial", "chardev:console"});
    else
        argv.insert(argv.end(), {"-chardev", "stdio,id=console,signal=off", "-serial", "chardev:console"});
    int n = 0;
    for (const auto& share : spec.shares) {
        std::string id = fmt::format("fs{}", n++);
        argv.insert(argv.end(), {"-fsdev",
                                 fmt::format("local,id={},path={},security_model=none{},multidevs=remap", id,
                                             qemu_escape(share.path.string()), share.read_only ? ",readonly=on" : ""),
                                 "-device", fmt::format("virtio-9p-pci,fsdev={},mount_tag={}", id, share.tag)});
    }
    if (spec.stdout_fd >= 0 || spec.stderr_fd >= 0 || spec.terminal) {
        argv.insert(argv.end(), {"-device", "virtio-serial-pci,id=wanlabser"});
        add_port(argv, spec.stdout_fd, "wanlabout", "wanlab.stdout");
        add_port(argv, spec.stderr_fd, "wanlaberr", "wanlab.stderr");
    }
    // The user's terminal: QEMU's stdio chardev puts it in raw mode (signal=off: Ctrl-C is a
    // byte for the guest's terminal, whose line discipline makes it a SIGINT there) and gives
    // it back when QEMU exits; in the guest it is a tty, /dev/hvc0.
    if (spec.terminal)
        argv.insert(argv.end(), {"-chardev", "stdio,id=term,signal=off", "-device",
                                 "virtconsole,bus=wanlabser.0,chardev=term,name=wanlab.tty"});
    return argv;
}

std::optional<fs::path> find_qemu() {
    if (const char* env = std::getenv("WANLAB_QEMU"); env != nullptr && *env != '\0') {
        if (::access(env, X_OK) == 0) return fs::path(env);
        return std::nullopt;
    }
    const char* path = std::getenv("PATH");
    std::string_view dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
    while (true) {
        auto colon = dirs.find(':');
        fs::path candidate = fs::path(dirs.substr(0, colon)) / "qemu-system-x86_64";
        if (!candidate.parent_path().empty() && ::access(candidate.c_str(), X_OK) == 0) return candidate;
        if (colon == std::string_view::npos) break;
        dirs.remove_prefix(colon + 1);
    }
    return std::nullopt;
}

std::string qemu_missing() {
    if (const char* env = std::getenv("WANLAB_QEMU"); env != nullptr && *env != '\0') {
        int err = ::access(env, X_OK) == 0 ? 0 : errno;
        return fmt::format(
            "WANLAB_QEMU={} is not a program wanlab can run ({}): point it at qemu-system-x86_64, or "
            "unset it to use the one on PATH",
            text::terminal_safe(env), err ? std::strerror(err) : "not executable");
    }
    return fmt::format(
        "qemu-system-x86_64 not found; install the Debian package {0} (apt-get install {0}), or set "
        "WANLAB_QEMU to its path",
        sys::debian_package("qemu-system-x86_64"));
}

}  // namespace wanlab::vm
