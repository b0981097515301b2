// A writer for the cpio "newc" format (the one the Linux kernel unpacks as an initramfs; see
// the kernel's Documentation/driver-api/early-userspace/buffer-format.rst).
//
// Contract: entries are appended in call order; each header is "070701" followed by 13
// eight-digit upper-case hex fields (ino, mode, uid, gid, nlink, mtime, filesize, devmajor,
// devminor, rdevmajor, rdevminor, namesize, check), then the NUL-terminated name, padded
// with NULs to a multiple of 4, then the data, padded likewise. Names are stored without a
// leading '/'. Missing parent directories are added automatically (mode 0755) before their
// first child. Output is deterministic: uid/gid 0, mtime 0, inodes numbered from 1.
// finish() appends the "TRAILER!!!" entry and returns the archive; the writer is then spent.
// Pure (no I/O); not thread-safe.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>

namespace wanlab::vm {

class CpioWriter {
public:
    /// A directory; `mode` holds permission bits only (e.g. 0755).
    void add_directory(std::string_view path, std::uint32_t mode = 0755);
    /// A regular file with the given contents and permission bits.
    void add_file(std::string_view path, std::string_view data, std::uint32_t mode = 0644);
    /// A symbolic link to `target` (stored as the entry's data).
    void add_symlink(std::string_view path, std::string_view target);
    /// A character device node (e.g. dev/console 5:1).
    void add_char_device(std::string_view path, std::uint32_t mode, std::uint32_t major, std::uint32_t minor);

    /// Appends the trailer and returns the whole archive.
    std::string finish();

private:
    struct Entry {
        std::string name;
        std::uint32_t mode;  // file type and permission bits
        std::string_view data;
        std::uint32_t rdev_major = 0;
        std::uint32_t rdev_minor = 0;
    };
    void add_parents(std::string_view name);
    void append(const Entry& e);
    static std::string normalise(std::string_view path);

    std::string out_;
    std::set<std::string, std::less<>> dirs_;
    std::uint32_t next_ino_ = 1;
    bool finished_ = false;
};

}  // namespace wanlab::vm
