#include "vm/vmlinux.h"

#include <sys/stat.h>

#include <elf.h>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"
#include "vm/files.h"
#include "vm/initramfs.h"

namespace wanlab::vm {

namespace fs = std::filesystem;

namespace {

constexpr std::uint32_t kXenElfnotePhys32Entry = 18;

template <class T>
bool read_at(std::string_view bytes, std::size_t offset, T& out) {
    if (offset > bytes.size() || bytes.size() - offset < sizeof(T)) return false;
    std::memcpy(&out, bytes.data() + offset, sizeof(T));
    return true;
}

bool notes_have_pvh(std::string_view notes) {
    std::size_t at = 0;
    Elf64_Nhdr nh;
    while (read_at(notes, at, nh)) {
        at += sizeof nh;
        const std::size_t name_bytes = (nh.n_namesz + 3u) & ~3u;
        const std::size_t desc_bytes = (nh.n_descsz + 3u) & ~3u;
        if (notes.size() - at < name_bytes + desc_bytes) return false;
        if (nh.n_type == kXenElfnotePhys32Entry && nh.n_namesz == 4 &&
            notes.substr(at, 4) == std::string_view("Xen\0", 4))
            return true;
        at += name_bytes + desc_bytes;
    }
    return false;
}

}  // namespace

std::optional<std::string> extract_vmlinux(std::string_view image) {
    if (image.size() < 0x250 || image.substr(0x202, 4) != "HdrS") return std::nullopt;
    std::uint8_t setup_sects = static_cast<std::uint8_t>(image[0x1F1]);
    if (setup_sects == 0) setup_sects = 4;
    std::uint32_t payload_offset = 0, payload_length = 0;
    read_at(image, 0x248, payload_offset);
    read_at(image, 0x24C, payload_length);
    const std::size_t start = (setup_sects + 1u) * 512u + payload_offset;
    if (start >= image.size() || image.size() - start < payload_length) return std::nullopt;
    std::string_view payload = image.substr(start, payload_length);
    if (payload.substr(0, 6) != std::string_view("\xFD"
                                                 "7zXZ\0",
                                                 6))
        return std::nullopt;
    std::string elf = xz_decompress(payload, "the kernel's xz payload");
    if (elf.substr(0, 4) != ELFMAG) return std::nullopt;
    return elf;
}

bool has_pvh_entry(std::string_view elf) {
    Elf64_Ehdr eh;
    if (!read_at(elf, 0, eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64)
        return false;
    for (unsigned i = 0; i < eh.e_phnum; ++i) {
        Elf64_Phdr ph;
        if (!read_at(elf, eh.e_phoff + std::size_t{i} * eh.e_phentsize, ph)) return false;
        if (ph.p_type != PT_NOTE || ph.p_offset > elf.size() || elf.size() - ph.p_offset < ph.p_filesz) continue;
        if (notes_have_pvh(elf.substr(ph.p_offset, ph.p_filesz))) return true;
    }
    return false;
}

fs::path boot_image(const Kernel& kernel, const fs::path& cache_dir) {
    struct stat st {};
    if (::stat(kernel.image.c_str(), &st) != 0) return kernel.image;
    const std::string key = fmt::format("{}|{}|{}", kernel.image.string(), st.st_size, st.st_mtim.tv_sec);
    const fs::path cached = cache_dir / fmt::format("vmlinux-{}-{:016x}", kernel.version, fnv1a64(key));
    const fs::path no_pvh = fs::path(cached).concat(".bzimage-only");
    std::error_code ec;
    if (fs::exists(cached, ec)) return cached;
    if (fs::exists(no_pvh, ec)) return kernel.image;
    try {
        fs::create_directories(cache_dir, ec);
        auto elf = extract_vmlinux(read_file(kernel.image));
        if (elf && has_pvh_entry(*elf)) {
            write_file_atomic(cached, *elf);
            prune_cache(cache_dir, fmt::format("vmlinux-{}-", kernel.version), cached);
            return cached;
        }
        write_file_atomic(no_pvh, "this kernel cannot be booted as an ELF through PVH\n");
    } catch (const Error& e) {
        std::fprintf(stderr, "wanlab: warning: booting the compressed kernel (slower): %s\n", e.what());
    }
    return kernel.image;
}

}  // namespace wanlab::vm
