// Booting faster under TCG: the uncompressed kernel (vmlinux) instead of the bzImage.
//
// A bzImage decompresses itself in the guest before the kernel proper starts; under TCG that
// costs about 7 s for Debian's xz-compressed kernel. QEMU can instead load the ELF vmlinux and
// enter it through the PVH entry point (kernels built with CONFIG_PVH=y carry a Xen ELF note
// of type XEN_ELFNOTE_PHYS32_ENTRY), so wanlab unpacks the payload once and caches it.
//
// Contract: extract_vmlinux() returns the ELF inside an xz-compressed bzImage, or nullopt when
// the image is not one (another compressor, no setup header); has_pvh_entry() tells whether a
// 64-bit ELF carries the PVH note. boot_image() returns the cached vmlinux for `kernel` when
// both hold, else the bzImage itself; it never fails because of the optimisation (a failure
// to cache falls back to the bzImage). Pure except boot_image(); thread-compatible.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "vm/kernel.h"

namespace wanlab::vm {

std::optional<std::string> extract_vmlinux(std::string_view bzimage);

bool has_pvh_entry(std::string_view elf);

std::filesystem::path boot_image(const Kernel& kernel, const std::filesystem::path& cache_dir);

}  // namespace wanlab::vm
