// The QEMU command line for one micro-VM, built from a plain description so that it can be
// checked without QEMU; and finding the QEMU binary.
//
// Contract: qemu_argv() is pure: argv[0] is spec.qemu, then the options in a fixed order.
// Paths inside QEMU's comma-separated options are escaped (',' doubled). The guest sees:
// ttyS0 on QEMU's stdio (the console), one virtio-9p-pci device per share, and, when
// stdout_fd/stderr_fd are >= 0, virtio-serial ports "wanlab.stdout"/"wanlab.stderr" written
// to those inherited descriptors of the QEMU process (via /proc/self/fd/N).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace wanlab::vm {

enum class Accel { kvm, tcg };
const char* accel_name(Accel accel) noexcept;

struct Share {
    std::string tag;  // the 9p mount tag the guest mounts
    std::filesystem::path path;
    bool read_only = false;
};

struct QemuSpec {
    std::filesystem::path qemu = "qemu-system-x86_64";
    Accel accel = Accel::tcg;
    std::filesystem::path kernel;
    std::filesystem::path initrd;
    std::string append;  // the kernel command line
    unsigned memory_mib = 1024;
    unsigned cpus = 1;
    std::vector<Share> shares;
    int stdout_fd = -1;  // QEMU-side fd for the guest command's stdout port; -1 = none
    int stderr_fd = -1;
    int console_fd = -1;    // QEMU-side fd the guest console (ttyS0) goes to; -1 = QEMU's stdio
    bool terminal = false;  // a virtconsole `wanlab.tty` on QEMU's stdio (the user's terminal)
};

/// The full argv for `spec`.
std::vector<std::string> qemu_argv(const QemuSpec& spec);

/// The kernel command line wanlab boots with; `verbose` lets every kernel message reach the
/// console (slower under TCG) instead of errors only.
std::string kernel_append(bool verbose = false);

/// "a,b" -> "a,,b", for values inside QEMU option strings.
std::string qemu_escape(const std::string& value);

/// qemu-system-x86_64 from $WANLAB_QEMU or $PATH; nullopt when absent.
std::optional<std::filesystem::path> find_qemu();
/// Why find_qemu() found none, with what to do: WANLAB_QEMU names no executable file, or
/// qemu-system-x86_64 is not installed.
std::string qemu_missing();

}  // namespace wanlab::vm
