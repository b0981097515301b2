// Giving the machine back from journals: after a crash (`wanlab restore`), and the check
// every run makes before it changes anything.
//
// Contract: a journal is stale when the process that wrote it is gone (pid and its start
// time no longer match). restore_journal() undoes a stale journal's entries newest first
// (sysctls back to their recorded values, devices and namespaces deleted if still there),
// removes the journal when every entry was undone, and can run any number of times.
// Callers hold the lock <dir>/lock while restoring. Not thread-safe.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "lab/journal.h"
#include "sysctl/proc_sys.h"

namespace wanlab::lab {

using Log = std::function<void(const std::string& line)>;

/// How each journal entry is undone on this machine, reporting each step through `log`.
Undo machine_undo(sysctl::ProcSys& proc, const Log& log = {});

/// Replays `journal` and removes it if everything was undone; returns the failures.
std::vector<std::string> restore_journal(const JournalFile& journal, const Undo& undo);

/// Journals in `dir` whose writer is gone.
std::vector<JournalFile> stale_journals(const std::filesystem::path& dir);

/// Before a run changes anything: with stale journals present, throws wanlab::Error naming
/// them unless `restore`, in which case they are restored first (throws if that fails).
/// The journal of run `own` (a killed run being resumed) is restored regardless.
void settle_stale_journals(const std::filesystem::path& dir, bool restore, sysctl::ProcSys& proc, const Log& log = {},
                           const std::string& own = "");

}  // namespace wanlab::lab
