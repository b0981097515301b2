// Thin RAII wrappers over the few OS resources the micro-VM runner holds, and the one checker
// every syscall goes through.
//
// Contract: check_sys() throws wanlab::Error("<what was attempted>: <strerror>") when a call
// returned -1; FileDescriptor owns one fd and closes it once; TempDir creates a fresh private
// directory and removes it, with everything in it, on destruction. Destructors never throw
// (failures are reported on stderr). Not thread-safe; none of these objects is shared.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace wanlab::vm {

/// Throws wanlab::Error("`what`: strerror(errno)") when `result` is -1; returns it otherwise.
long check_sys(long result, std::string_view what);

/// Throws wanlab::Error("`what`: strerror(err)") for a nonzero error number (pthread/posix_spawn
/// style APIs that return the error instead of setting errno).
void check_errno(int err, std::string_view what);

/// One owned file descriptor (move-only). Closes it on destruction.
class FileDescriptor {
  public:
    FileDescriptor() = default;
    explicit FileDescriptor(int fd) noexcept : fd_(fd) {}
    FileDescriptor(FileDescriptor&& other) noexcept : fd_(other.release()) {}
    FileDescriptor& operator=(FileDescriptor&& other) noexcept;
    FileDescriptor(const FileDescriptor&) = delete;
    FileDescriptor& operator=(const FileDescriptor&) = delete;
    ~FileDescriptor() { reset(); }

    int get() const noexcept { return fd_; }
    bool valid() const noexcept { return fd_ >= 0; }
    int release() noexcept;
    void reset() noexcept;

  private:
    int fd_ = -1;
};

/// A pipe: read end and write end, both close-on-exec.
struct Pipe {
    FileDescriptor read;
    FileDescriptor write;
};
Pipe make_pipe();

/// A private temporary directory (mode 0700). Creates it in the constructor, removes it
/// recursively in the destructor.
class TempDir {
  public:
    /// Creates `<parent>/<prefix>XXXXXX`.
    TempDir(const std::filesystem::path& parent, std::string_view prefix);
    TempDir(TempDir&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }
    TempDir& operator=(TempDir&&) = delete;
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    ~TempDir();

    const std::filesystem::path& path() const noexcept { return path_; }

  private:
    std::filesystem::path path_;
};

/// Reads a whole file; throws wanlab::Error naming the file on failure.
std::string read_file(const std::filesystem::path& path);

/// Writes `data` to `path` atomically (a temporary sibling, then rename).
void write_file_atomic(const std::filesystem::path& path, std::string_view data);

/// Removes the files in `dir` whose names start with `prefix`, except `keep` (stale cache
/// entries of an older build of the same thing). Best effort: errors are ignored.
void prune_cache(const std::filesystem::path& dir, std::string_view prefix,
                 const std::filesystem::path& keep) noexcept;

/// ${XDG_CACHE_HOME:-$HOME/.cache}/wanlab (not created).
std::filesystem::path cache_root();

}  // namespace wanlab::vm
