// Choosing QEMU's accelerator: KVM where /dev/kvm answers and a probe boot has shown that a
// guest actually gets through boot on this host, else multi-threaded TCG.
//
// Contract: choose_accel() is pure given its inputs and callbacks: a forced choice
// (--accel / WANLAB_VM_ACCEL) wins; without a usable /dev/kvm the answer is TCG; with one, a
// cached verdict decides, and only without a verdict is probe() called (once) and its answer
// passed to remember(). The verdict cache key covers the host kernel, the QEMU binary and the
// guest kernel, so an upgrade of any of them probes again. Not thread-safe (files).
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "vm/qemu.h"

namespace wanlab::vm {

struct AccelChoice {
    Accel accel = Accel::tcg;
    std::string reason;  // one line, e.g. "tcg: KVM probe boot hung (cached verdict)"
};

struct AccelInputs {
    std::optional<Accel> forced;
    bool kvm_device_usable = false;
    std::optional<bool> kvm_verdict;  // cached: true = KVM boots, false = it hangs
};

AccelChoice choose_accel(const AccelInputs& in, const std::function<bool()>& probe,
                         const std::function<void(bool)>& remember);

/// "kvm" / "tcg" (any case) -> Accel; throws InputError naming `source` otherwise.
Accel parse_accel(std::string_view text, std::string_view source);

/// True when /dev/kvm opens read-write and answers KVM_GET_API_VERSION with 12.
bool kvm_device_usable();

/// Where the KVM verdict for this host + QEMU + guest kernel is cached.
std::filesystem::path kvm_verdict_file(const std::filesystem::path& cache_dir, const std::filesystem::path& qemu,
                                       std::string_view kernel_version);
std::optional<bool> read_kvm_verdict(const std::filesystem::path& file);
void write_kvm_verdict(const std::filesystem::path& file, bool works);

}  // namespace wanlab::vm
