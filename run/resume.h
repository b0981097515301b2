// `wanlab run FILE --resume [RUN]`: whether a recorded run may be continued with this
// experiment on this machine.
//
// Contract: resume_problems() is pure. A run continues only with the trials it planned: the
// file must expand to the same trials (same places, same stable ids), else the differences
// are `refused` and nothing overrides that. What changes the meaning of measurements without
// changing the trials (the file's text, its --set arguments, the shard) or the conditions
// they were taken under (kernel, machine, micro-VM or host) is `forceable`: refused unless
// --force, and then recorded in the new session's note. The runner continues the run (see
// RunnerOptions::resume in run/runner.h).
#pragma once

#include <string>
#include <vector>

#include "experiment/experiment.h"
#include "results/model.h"

namespace wanlab::run {

struct ResumeProblems {
    std::vector<std::string> refused;    ///< never resumable: another plan
    std::vector<std::string> forceable;  ///< resumable with --force
};

/// What stands between `stored` and its continuation by `exp` (read from `text` with `sets`,
/// `shard` as given to --shard) on a machine described by `now`.
ResumeProblems resume_problems(const results::RunData& stored, const experiment::Experiment& exp,
                               const std::string& text, const std::vector<std::string>& sets, const std::string& shard,
                               const results::Environment& now);

/// The sessions of `run` as recorded; a run recorded before sessions were kept gets one made
/// of its own times, status and environment.
std::vector<results::Session> sessions_of(const results::Run& run);

/// The run's last session ends as the run does: its finished time, status and error.
void end_session(results::Run& run);

/// "wanlab run FILE --resume RUN --out OUT": the command that continues run `id`.
std::string resume_command(const std::string& file, const std::string& id, const std::string& out);

/// The run `--resume` continues, as recorded in `out`/results.db (`run`: its id, "" = the
/// latest): one that did not complete, and (outside the micro-VM, `inside_vm` false, where
/// its journal would be) not still running. Throws InputError saying what to do otherwise.
results::RunData resumable(const std::string& out, const std::string& run, bool inside_vm);

/// What `wanlab run --resume` was given besides the recorded run.
struct ResumeRequest {
    std::string file;               ///< the experiment file, as given
    std::string text;               ///< its text now
    std::vector<std::string> sets;  ///< --set
    std::string shard;              ///< --shard
    std::string out;                ///< --out
    bool force = false;             ///< --force
};

/// Refuses to continue `before` with `exp` on a machine described by `now`
/// (resume_problems()); returns what --force let through ("" if nothing), for the new
/// session's note. Throws InputError listing the problems and what to do.
std::string admit_resume(const results::RunData& before, const experiment::Experiment& exp, const ResumeRequest& r,
                         const results::Environment& now);

/// The record a resumed run continues from `before`: its header running again, its sessions
/// (a last one that never recorded its end marked killed), its "done" trials and their
/// measurements kept, every other trial planned anew from `exp`.
results::RunData resumed_record(const experiment::Experiment& exp, const results::RunData& before);

}  // namespace wanlab::run
