// The stages of `wanlab tune` as runs: each stage's candidates become the variants of one
// `wanlab run` of the file (its [link] and [sweep] points the paths), recorded in the results
// database as run TUNE-sK, so `results show`, `compare` and the page read them like any run.
//
// Contract: StageRunner::operator() loads the file with the stage's candidates as variants
// (experiment/experiment.h load_experiment() `made`), the stage's length and repeats as
// `--set run.duration=...`, `run.repeats=...`, runs it on this machine (run/launch.h
// measure_here(), which journals and restores as any run does) and reads back each
// candidate's goal and constraint metrics per path and repeat, and the baseline's diagnosis.
// A stage whose run TUNE-sK the database already holds finished is read back and not measured
// again (`wanlab tune --resume`); one it holds unfinished is resumed. Not thread-safe.
#pragma once

#include <string>
#include <vector>

#include "experiment/experiment.h"
#include "tune/search.h"

namespace wanlab::tune {

struct StageSetup {
    std::string file, text;         ///< the experiment as read
    std::vector<std::string> sets;  ///< the user's --set
    std::string out;                ///< the results folder
    std::string id;                 ///< the tune's id: its stages are ID-s1, ID-s2, ...
    bool quiet = false;
};

class StageRunner {
public:
    StageRunner(StageSetup setup, const experiment::TuneSpec& spec);
    StageResult operator()(const StageRequest& req);
    /// The run ids of the stages measured or read so far, in order.
    const std::vector<std::string>& runs() const { return runs_; }

private:
    StageSetup setup_;
    const experiment::TuneSpec& spec_;
    std::vector<std::string> runs_;
};

/// The variants that make `candidates`, in their order.
std::vector<experiment::MadeVariant> variants_of(const experiment::TuneSpec& spec,
                                                 const std::vector<Candidate>& candidates);

/// Seconds between two ISO 8601 UTC times as the results database writes them; NaN if either
/// does not parse.
double seconds_between(const std::string& from, const std::string& to);

}  // namespace wanlab::tune
