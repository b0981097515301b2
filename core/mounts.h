// Which file system holds a path, from the mount table: what a run needs to know before it
// lets its services write their files there.
//
// Contract: mount_type() is pure (the text of /proc/self/mountinfo in, a type out);
// on_network_fs() reads /proc/self/mountinfo and answers false when it cannot. Thread-safe.
#pragma once

#include <filesystem>
#include <string>

namespace wanlab::sys {

/// Whether `dir` is on a network filesystem (9p, NFS, SMB/CIFS, Ceph, virtiofs, FUSE), by
/// the type of the mount that holds it in /proc/self/mountinfo.
bool on_network_fs(const std::filesystem::path& dir);

/// The file system type of the mount that holds the absolute path `dir`, from the text of a
/// /proc/self/mountinfo ("" when none does). Pure: for on_network_fs() and its tests.
std::string mount_type(const std::string& mountinfo, const std::filesystem::path& dir);

}  // namespace wanlab::sys
