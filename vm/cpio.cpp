#include "vm/cpio.h"

#include <sys/stat.h>

#include <fmt/format.h>

#include "core/error.h"

namespace wanlab::vm {

namespace {
constexpr std::size_t kHeaderBytes = 110;

void pad4(std::string& out) {
    while (out.size() % 4 != 0) out.push_back('\0');
}
}  // namespace

std::string CpioWriter::normalise(std::string_view path) {
    while (!path.empty() && path.front() == '/') path.remove_prefix(1);
    while (!path.empty() && path.back() == '/') path.remove_suffix(1);
    if (path.empty()) throw Error("cpio: an entry needs a non-empty path");
    return std::string(path);
}

void CpioWriter::add_parents(std::string_view name) {
    for (auto slash = name.find('/'); slash != std::string_view::npos; slash = name.find('/', slash + 1)) {
        std::string_view parent = name.substr(0, slash);
        if (dirs_.count(parent) != 0) continue;
        dirs_.emplace(parent);
        append(Entry{std::string(parent), S_IFDIR | 0755, {}});
    }
}

void CpioWriter::add_directory(std::string_view path, std::uint32_t mode) {
    std::string name = normalise(path);
    if (dirs_.count(name) != 0) return;
    add_parents(name);
    dirs_.insert(name);
    append(Entry{std::move(name), S_IFDIR | (mode & 07777), {}});
}

void CpioWriter::add_file(std::string_view path, std::string_view data, std::uint32_t mode) {
    std::string name = normalise(path);
    add_parents(name);
    append(Entry{std::move(name), S_IFREG | (mode & 07777), data});
}

void CpioWriter::add_symlink(std::string_view path, std::string_view target) {
    std::string name = normalise(path);
    add_parents(name);
    append(Entry{std::move(name), S_IFLNK | 0777, target});
}

void CpioWriter::add_char_device(std::string_view path, std::uint32_t mode, std::uint32_t major, std::uint32_t minor) {
    std::string name = normalise(path);
    add_parents(name);
    append(Entry{std::move(name), S_IFCHR | (mode & 07777), {}, major, minor});
}

void CpioWriter::append(const Entry& e) {
    if (finished_) throw Error("cpio: entry added after finish()");
    const bool is_dir = (e.mode & S_IFMT) == S_IFDIR;
    const bool is_trailer = e.name == "TRAILER!!!";
    const std::uint32_t ino = is_trailer ? 0 : next_ino_++;
    out_ += fmt::format(
        "070701{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}"
        "{:08X}{:08X}",
        ino, e.mode, 0, 0, is_dir ? 2 : 1, 0, e.data.size(), 0, 0, e.rdev_major, e.rdev_minor, e.name.size() + 1, 0);
    out_ += e.name;
    out_.push_back('\0');
    pad4(out_);
    out_.append(e.data);
    pad4(out_);
}

std::string CpioWriter::finish() {
    static_assert(kHeaderBytes == 6 + 13 * 8);
    append(Entry{"TRAILER!!!", 0, {}});
    finished_ = true;
    return std::move(out_);
}

}  // namespace wanlab::vm
