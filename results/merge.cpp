#include "results/merge.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "core/error.h"

namespace wanlab::results {

namespace {

/// Which copy of a trial a merge keeps: a finished measurement over a failed one over one an
/// interruption cut short. Two "done" copies are an overlap.
int rank_of(TrialStatus status) {
    switch (status) {
        case TrialStatus::done: return 3;
        case TrialStatus::failed: return 2;
        case TrialStatus::interrupted: return 1;
        case TrialStatus::pending: break;  // never measured
    }
    return 0;
}

std::string differs(const Run& a, const Run& b) {
    if (a.experiment != b.experiment) return "its experiment name differs";
    if (a.text != b.text) return "the experiment file's text differs";
    if (a.sets != b.sets) return "its --set arguments differ";
    return "";
}

}  // namespace

std::string origin_of(const MergeInput& input) {
    const auto& r = input.data.run;
    return fmt::format("run {}{} of {} on {}, kernel {}", r.id, r.shard.empty() ? "" : " (shard " + r.shard + ")",
                       input.source, r.env.hostname.empty() ? r.env.where : r.env.hostname, r.env.kernel);
}

RunData merge_runs(const std::vector<MergeInput>& inputs, const MergeOptions& options,
                   std::vector<std::string>* notes) {
    if (inputs.size() < 2) throw InputError("results merge needs at least two runs to merge");
    const auto& first = inputs.front();
    std::vector<std::string> problems, forced;
    bool same_text = true;
    for (const auto& in : inputs) {
        auto why = differs(in.data.run, first.data.run);
        if (why.empty()) continue;
        same_text = false;
        (options.force ? forced : problems)
            .push_back(fmt::format("run {} of {} is not of the same experiment as run {} of {}: {}", in.data.run.id,
                                   in.source, first.data.run.id, first.source, why));
    }
    // A trial is its configuration (Trial::id), whatever its position in either plan.
    struct Kept {
        std::size_t input;
        const Trial* trial;
    };
    std::map<std::string, Kept> kept;
    std::vector<std::string> order;  // ids in the order first seen
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        for (const auto& t : inputs[i].data.trials) {
            auto [at, fresh] = kept.emplace(t.id, Kept{i, &t});
            if (fresh) {
                order.push_back(t.id);
                continue;
            }
            auto& k = at->second;
            const auto& other = inputs[k.input];
            auto what =
                fmt::format("trial {} ({}) was measured by run {} of {} and by run {} of {}", t.index, t.variant,
                            other.data.run.id, other.source, inputs[i].data.run.id, inputs[i].source);
            if (rank_of(t.status) == 3 && rank_of(k.trial->status) == 3) {
                (options.force ? forced : problems)
                    .push_back(what + (options.force ? fmt::format(": kept run {}'s", other.data.run.id) : ""));
            } else if (rank_of(t.status) > rank_of(k.trial->status)) {
                if (rank_of(k.trial->status) > 0 && notes)
                    notes->push_back(fmt::format("trial {} ({}): kept the {} copy of run {}, not the {} one of run {}",
                                                 t.index, t.variant, t.status, inputs[i].data.run.id, k.trial->status,
                                                 other.data.run.id));
                k = Kept{i, &t};
            }
        }
    }
    if (!problems.empty()) {
        std::string text = "results merge refuses:";
        for (const auto& p : problems) text += "\n  " + p;
        throw InputError(text +
                         "\nmerge runs of one experiment file and --set arguments whose trials do not overlap "
                         "(the shards of one --shard K/N, a run and the rerun of its rest), or give --force "
                         "to keep the first run's copy of each trial");
    }
    if (notes)
        for (const auto& f : forced) notes->push_back(f + " (--force)");

    RunData out;
    out.run = first.data.run;
    out.run.id = options.run_id;
    out.run.shard.clear();
    out.run.error.clear();
    out.run.status = RunStatus::complete;
    out.run.finished.clear();
    out.run.sessions.clear();  // each trial's origin says where it was measured
    for (const auto& in : inputs) {
        const auto& r = in.data.run;
        if (!r.started.empty() && (out.run.started.empty() || r.started < out.run.started)) out.run.started = r.started;
        if (r.finished > out.run.finished) out.run.finished = r.finished;
        if (r.status != RunStatus::complete && out.run.status == RunStatus::complete) {
            out.run.status = r.status;
            out.run.error = fmt::format("run {} of {} ended {}{}", r.id, in.source, r.status,
                                        r.error.empty() ? "" : ": " + r.error);
        }
    }
    // Positions stay those of the plan, unless forced texts made two trials claim one.
    std::vector<Kept> chosen;
    for (const auto& id : order) chosen.push_back(kept.at(id));
    std::sort(chosen.begin(), chosen.end(),
              [](const Kept& a, const Kept& b) { return a.trial->index < b.trial->index; });
    std::set<std::size_t> positions;
    for (const auto& k : chosen) positions.insert(k.trial->index);
    const bool renumber = !same_text && positions.size() != chosen.size();
    for (std::size_t n = 0; n < chosen.size(); ++n) {
        const auto& k = chosen[n];
        Trial t = *k.trial;
        t.index = renumber ? n + 1 : k.trial->index;
        const auto& from = inputs[k.input].data.run;
        if (rank_of(t.status) > 0)
            t.origin = origin_of(inputs[k.input]) +
                       (from.sessions.size() > 1 && t.session ? fmt::format(", session {}", t.session) : "");
        t.session = 0;
        for (const auto& m : inputs[k.input].data.measurements) {
            if (m.trial != k.trial->index) continue;
            out.measurements.push_back(m);
            out.measurements.back().trial = t.index;
        }
        out.trials.push_back(std::move(t));
    }
    if (renumber && notes)
        notes->push_back("the forced runs' plans differ: trials renumbered 1 to " + std::to_string(chosen.size()) +
                         " in their plans' order");
    out.run.planned_trials = out.trials.size();
    if (same_text)  // each input's own count: a shard's is its part, an unsharded run's the whole
        for (const auto& in : inputs)
            out.run.planned_trials = std::max(out.run.planned_trials, in.data.run.planned_trials);
    return out;
}

}  // namespace wanlab::results
