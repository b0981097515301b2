// xz unpacking (modules, the kernel's payload) and the PVH check, on synthetic images.
#include <elf.h>
#include <lzma.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/error.h"
#include "vm/initramfs.h"
#include "vm/vmlinux.h"

using namespace wanlab::vm;

namespace {

std::string xz(const std::string& data) {
    std::string out(data.size() + 1024, '\0');
    std::size_t pos = 0;
    REQUIRE(lzma_easy_buffer_encode(6, LZMA_CHECK_CRC32, nullptr, reinterpret_cast<const std::uint8_t*>(data.data()),
                                    data.size(), reinterpret_cast<std::uint8_t*>(out.data()), &pos,
                                    out.size()) == LZMA_OK);
    out.resize(pos);
    return out;
}

template <class T>
void put(std::string& buf, std::size_t at, const T& v) {
    std::memcpy(buf.data() + at, &v, sizeof v);
}

// A 64-bit ELF with one PT_NOTE segment holding `note_type` under the name "Xen".
std::string elf_with_note(std::uint32_t note_type) {
    std::string elf(0x200, '\0');
    Elf64_Ehdr eh{};
    std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
    eh.e_ident[EI_CLASS] = ELFCLASS64;
    eh.e_phoff = sizeof eh;
    eh.e_phentsize = sizeof(Elf64_Phdr);
    eh.e_phnum = 1;
    put(elf, 0, eh);
    Elf64_Phdr ph{};
    ph.p_type = PT_NOTE;
    ph.p_offset = 0x100;
    ph.p_filesz = sizeof(Elf64_Nhdr) + 4 + 8;
    put(elf, sizeof eh, ph);
    Elf64_Nhdr nh{4, 8, note_type};
    put(elf, 0x100, nh);
    std::memcpy(elf.data() + 0x100 + sizeof nh, "Xen", 4);
    return elf;
}

// A bzImage-shaped blob whose payload is `payload` (setup_sects 1 -> payload at 1024).
std::string bzimage_with_payload(const std::string& payload) {
    std::string img(1024, '\0');
    img[0x1F1] = 1;
    img.replace(0x202, 4, "HdrS");
    put(img, 0x248, std::uint32_t{0});
    put(img, 0x24C, static_cast<std::uint32_t>(payload.size()));
    return img + payload;
}

}  // namespace

TEST_CASE("xz data round-trips and corrupt data names its source", "[xz]") {
    std::string data(100000, 'm');
    CHECK(xz_decompress(xz(data), "m.ko.xz") == data);
    CHECK_THROWS_WITH(xz_decompress("not xz", "bad.ko.xz"), Catch::StartsWith("bad.ko.xz: corrupt xz data"));
}

TEST_CASE("the PVH note is found in an ELF only under its own type", "[vmlinux]") {
    CHECK(has_pvh_entry(elf_with_note(18)));
    CHECK_FALSE(has_pvh_entry(elf_with_note(17)));
    CHECK_FALSE(has_pvh_entry(elf_with_note(18).substr(0, 0x100)));  // note cut off
}

TEST_CASE("the ELF inside an xz bzImage payload is unpacked", "[vmlinux]") {
    const std::string elf = elf_with_note(18);
    auto out = extract_vmlinux(bzimage_with_payload(xz(elf)));
    REQUIRE(out.has_value());
    CHECK(*out == elf);
    CHECK_FALSE(extract_vmlinux(bzimage_with_payload("\x1f\x8b gzip is not handled")));
}
