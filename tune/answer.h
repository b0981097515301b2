// What `wanlab tune` tells the user: the recommendation with its evidence, as text or JSON,
// and as files a machine applies (a sysctl.d drop-in, a tuned profile).
//
// Contract: pure functions of a search's Outcome and what it was about. A key's value "as
// written" is the file's or, for a sysctl, the measured machine's (`written`); every number
// carries its interval or the test that judged it; what the search dropped, why, and what it
// could not settle is said beside what it chose. Thread-safe.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "experiment/tune.h"
#include "tune/search.h"

namespace wanlab::tune {

struct Subject {
    const experiment::TuneSpec* spec = nullptr;
    std::vector<int> as_written;       ///< per key: the index of the machine's value, or kAsWritten
    std::vector<std::string> written;  ///< per key: its value as written or on the machine ("" unknown)
    std::vector<std::string> paths;    ///< per path: its sweep point ("[link]" without a sweep)
    std::vector<std::string> runs;     ///< the stages' run ids
    std::string id;                    ///< the tune's id
    std::string file;
};

/// A key's value in `c` as the output names it: its label, else what is written.
std::string value_of(const Subject& s, const Candidate& c, std::size_t key);

std::string answer_text(const Outcome& o, const Subject& s);
/// {"goal", "tolerance", "budget_seconds", "measured_seconds", "recommended" (every key: its
/// value), "changes" (the keys that differ from the baseline), "baseline", "best" (each: label
/// and the goal's mean and 95% half-width per path), "beats_baseline", "paths", "contributions",
/// "stages" (each candidate's means, score and why it was dropped), "seeded_by", "notes", "runs"}.
nlohmann::json answer_json(const Outcome& o, const Subject& s);
/// The answer as a self-contained page (report/html.h): the recommendation and its evidence
/// per path, what each change contributes, and the search as a chart of every candidate's
/// score by stage, the recommendation marked.
std::string answer_page(const Outcome& o, const Subject& s);
/// A sysctl.d drop-in of the recommendation's sysctl keys, each with a comment giving the
/// measured reason and which machine it belongs on; "" when it changes no sysctl.
std::string sysctl_dropin(const Outcome& o, const Subject& s);
/// A tuned profile (tuned.conf) of the same keys; "" when it changes no sysctl.
std::string tuned_profile(const Outcome& o, const Subject& s);

}  // namespace wanlab::tune
