// Thin RAII wrappers over the few OS resources the micro-VM runner holds besides
// descriptors (core/sys.h has the fd owner and the syscall checker): pipes, a private
// temporary directory, atomic files, the cache folder.
//
// Contract: failures throw wanlab::Error("<what was attempted>: <strerror>"); TempDir creates a fresh private
// directory and removes it, with everything in it, on destruction. Destructors never throw
// (failures are reported on stderr). Not thread-safe; none of these objects is shared.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "core/process.h"
#include "core/sys.h"

namespace wanlab::vm {

// The syscall checkers, the fd owner and pipes are core's (core/sys.h, core/process.h).
using sys::check_errno;
using sys::check_sys;
using sys::Fd;
using sys::make_pipe;
using sys::Pipe;

/// A private temporary directory (mode 0700). Creates it in the constructor, removes it
/// recursively in the destructor. owned_by_this_process() names one after this process, so a
/// later one can tell it was left by a process that is gone (remove_left_behind()).
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

    /// `<parent>/<prefix><pid>.<start time>-XXXXXX`, this process's.
    static TempDir owned_by_this_process(const std::filesystem::path& parent, std::string_view prefix);
    /// Removes the folders owned_by_this_process() made in `parent` with `prefix` whose process
    /// is gone (SIGKILL, a crash): only this user's, only folders, never through a symlink.
    static void remove_left_behind(const std::filesystem::path& parent, std::string_view prefix);

private:
    std::filesystem::path path_;
};

/// Reads a whole file; throws wanlab::Error naming the file on failure.
std::string read_file(const std::filesystem::path& path);

/// Writes `data` to `path` atomically (a temporary sibling, then rename).
void write_file_atomic(const std::filesystem::path& path, std::string_view data);

/// Removes the files in `dir` whose names start with `prefix`, except `keep` (stale cache
/// entries of an older build of the same thing). Best effort: errors are ignored.
void prune_cache(const std::filesystem::path& dir, std::string_view prefix, const std::filesystem::path& keep) noexcept;

/// ${XDG_CACHE_HOME:-$HOME/.cache}/wanlab (not created).
std::filesystem::path cache_root();

}  // namespace wanlab::vm
