// Where a trial's files go: its folder beside the results (services' logs and rendered
// templates, packet captures), and a private staging folder when that place is on a network
// filesystem.
//
// Contract: trial_dir() and writes_files() are pure. StageDir creates a private folder under
// /tmp and removes it with what is left in it; move_folder() throws wanlab::Error naming both
// folders when the copy fails. Not thread-safe.
#pragma once

#include <filesystem>
#include <string>

#include "experiment/experiment.h"

namespace wanlab::run {

/// The folder of trial `t` of run `run` under `files_dir`: FILES/RUN/trial-N-ID.
std::filesystem::path trial_dir(const std::filesystem::path& files_dir, const std::string& run,
                                const experiment::Trial& t);

/// Whether `t` writes files while it measures (its services, or a probe's capture): over a
/// network filesystem such as the micro-VM's 9p share, both are slowed down.
bool writes_files(const experiment::Trial& t);

/// StageDir: a private folder under /tmp where services work when the results folder is on
/// a network filesystem. Creates: the folder (sys::make_service_dir). Undoes: removes it and
/// what is left in it.
class StageDir {
public:
    StageDir();
    ~StageDir();
    StageDir(const StageDir&) = delete;
    StageDir& operator=(const StageDir&) = delete;
    const std::filesystem::path& path() const { return path_; }

private:
    std::filesystem::path path_;
};

/// A staged trial folder to where the results keep it (nothing when they are the same).
void move_folder(const std::filesystem::path& from, const std::filesystem::path& to);

}  // namespace wanlab::run
