// The run journal: what wanlab is about to change, written down before it changes it, so a
// run killed with SIGKILL can still be undone by `wanlab restore`.
//
// Format: JSON lines under /run/wanlab/<run>.journal (tmpfs: a reboot, which undoes every
// change anyway, also forgets the journal). One object per line, appended and fsynced before
// the change it describes; a torn last line (killed mid-write) is ignored on reading, since
// its change never started. JSON rather than a home-made line format because values contain
// spaces and tabs ("4096\t131072\t6291456") and the lead's qdisc entries carry structured
// data; each line still reads on its own with `cat`.
//   {"op":"begin","run":"r1","pid":123,"start_time":456789,"version":1}
//   {"op":"netns","name":"wanlab-r1-client"}
//   {"op":"link","ns":"wanlab-r1-router","name":"wl-rc"}
//   {"op":"sysctl","ns":"","key":"net.core.rmem_max","old":"212992","wrote":"67108864"}
//   {"op":"sysctl-write","ns":"","key":"net.core.rmem_max","value":"212992"}  (each later write)
//   {"op":"qdisc","ns":"wanlab-r1-router","dev":"wl-rs","snapshot":"device wl-rs\nqdisc 2400..."}
//   {"op":"process","ns":"wanlab-r1-server","name":"web","pid":4242,"start_time":98765}
//                                    (a [[service]]: its process group, right after the spawn)
//   {"op":"host","ns":"","dev":"eth0","snapshot":"...","ifb":"wlifb-eth0","ingress_created":true,
//    "filter_parent":4294901760,"filter_prio":1,"v6":false}      (host mode: netem::HostUndo)
// Replay undoes entries newest first. Journal removes its file on destruction, after the
// run's resources (declared after it) have been undone, unless keep() was called because an
// undo failed. Not thread-safe.
//
// The directory is a trust boundary: root reads it and acts on what it says. It is kept
// 0700 and owned by this user (check_run_dir(), on every use), its files are opened without
// following symlinks, and replay checks every field of an entry before acting on it: a
// namespace must be one of the run's own ("wanlab-RUN-..."), a device name one the kernel
// could have made, a sysctl key a canonical net.* name, a value one line.
#pragma once

#include <sys/types.h>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/proc.h"
#include "netem/host.h"

namespace wanlab::lab {

/// Whether `run` is a run id: 1 to 24 of a-z, 0-9 and `-` (it names the journal's file and
/// the lab's namespaces).
bool valid_run_id(const std::string& run);

/// Where journals and locks live.
inline const char* const kRunDir = "/run/wanlab";

/// Makes `dir` if it is missing (0700) and checks it is safe to trust: a real directory (not
/// a symlink), owned by this user, not writable by anyone else; tightens a looser mode that
/// an older wanlab left (0755) to 0700. Throws wanlab::Error saying what is wrong and how to
/// fix it.
void check_run_dir(const std::filesystem::path& dir);

class Journal {
public:
    /// Creates <dir>/<run>.journal (refusing an existing one) and writes the begin entry.
    Journal(const std::filesystem::path& dir, const std::string& run);
    ~Journal();
    Journal(const Journal&) = delete;
    Journal& operator=(const Journal&) = delete;

    /// Appends one entry and fsyncs it; throws wanlab::Error if it cannot be made durable.
    void record(const nlohmann::json& entry);
    /// Leaves the file in place on destruction (an undo failed; `wanlab restore` retries).
    void keep() noexcept { keep_ = true; }
    const std::filesystem::path& path() const { return path_; }
    const std::string& run() const { return run_; }

private:
    std::filesystem::path path_;
    std::string run_;
    int fd_ = -1;
    bool keep_ = false;
};

nlohmann::json netns_entry(const std::string& name);
nlohmann::json link_entry(const std::string& ns, const std::string& name);
/// Before a key's first change: its old value and the value about to be written.
nlohmann::json sysctl_entry(const std::string& ns, const std::string& key, const std::string& old,
                            const std::string& wrote);
/// Before each later write of the key.
nlohmann::json sysctl_write_entry(const std::string& ns, const std::string& key, const std::string& value);
/// Before the first change to `dev`'s qdiscs: its tree as netem::DeviceQdiscs::serialize()
/// writes it (the kernel's own messages in hex), which restore replays.
nlohmann::json qdisc_entry(const std::string& ns, const std::string& dev, const std::string& snapshot);
/// Before host mode's first change to a real interface: everything undoing it takes.
nlohmann::json host_entry(const std::string& ns, const netem::HostUndo& undo);
/// Right after a service's spawn: its process group (led by `pid`) and the leader's start
/// time, so restore kills the group only while it is still that one. (Before the entry is
/// written the process cannot outlive wanlab: it is SIGKILLed when wanlab's thread dies.)
nlohmann::json process_entry(const std::string& ns, const std::string& name, pid_t pid, unsigned long long start_time);
/// Right after the run makes a private folder under /tmp (sys::make_service_dir():
/// /tmp/wanlab-...-XXXXXX, root's, 0755) that it removes when it ends: restore removes it too.
nlohmann::json folder_entry(const std::string& path);
/// The HostUndo of a "host" entry; throws wanlab::Error if it has no device.
netem::HostUndo host_undo_of(const nlohmann::json& entry);

/// A journal as read back from disk.
struct JournalFile {
    std::filesystem::path path;
    std::string run;
    pid_t pid = 0;
    unsigned long long start_time = 0;    ///< of `pid`, in clock ticks since boot (/proc/PID/stat)
    std::vector<nlohmann::json> entries;  ///< after the begin entry, oldest first
    /// Why the journal cannot be trusted or read ("" if it can): not a regular file, a
    /// symlink, too large, no valid begin entry. Such a journal is never replayed; `wanlab
    /// restore --forget RUN` removes it.
    std::string problem;
    /// True while the process that wrote it is still running (a live run, not a stale one).
    bool live() const;
};

/// Reads a journal; a torn or unparsable last line is dropped. Never throws for what the
/// file holds: a journal that cannot be read comes back with `problem` set.
JournalFile read_journal(const std::filesystem::path& path);
/// Every <run>.journal in `dir`, sorted by run.
std::vector<JournalFile> find_journals(const std::filesystem::path& dir);

using sys::process_start_time;  // a journal's owner: alive, or its pid reused?

/// How replay() undoes each kind of entry; each must succeed when the thing is already gone.
struct Undo {
    std::function<void(const std::string& name)> netns;
    std::function<void(const std::string& ns, const std::string& name)> link;
    /// `wrote`: what the run wrote last ("" for a journal from before wanlab recorded it).
    std::function<void(const std::string& ns, const std::string& key, const std::string& old, const std::string& wrote)>
        sysctl;
    std::function<void(const std::string& ns, const std::string& dev, const std::string& snapshot)> qdisc;
    std::function<void(const std::string& ns, const netem::HostUndo& undo)> host;
    std::function<void(const std::string& name, pid_t pgid, unsigned long long start_time)> process;
    std::function<void(const std::string& path)> folder;
};

/// Why `entry` of `run`'s journal is not one wanlab could have written ("" if it is): every
/// field replay would act on, checked.
std::string entry_problem(const nlohmann::json& entry, const std::string& run);

/// Undoes the entries newest first; returns one message per entry that could not be undone
/// or failed entry_problem() (the others are undone regardless). Idempotent.
std::vector<std::string> replay(const JournalFile& journal, const Undo& undo);

/// An exclusive flock on a file, held for the object's life.
///
/// Creates: the lock file if needed and the lock. Undoes: releases the lock (the file stays;
/// removing it would race with another process that opened it). The kernel also drops the
/// lock when the process dies, even by SIGKILL.
class FileLock {
public:
    /// Waits for the lock if `wait`, else throws wanlab::Error naming `what` when it is held.
    FileLock(const std::filesystem::path& path, bool wait, const std::string& what);
    ~FileLock();
    FileLock(FileLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
    FileLock& operator=(FileLock&&) = delete;
    FileLock(const FileLock&) = delete;
    FileLock& operator=(const FileLock&) = delete;

private:
    int fd_ = -1;
};

}  // namespace wanlab::lab
