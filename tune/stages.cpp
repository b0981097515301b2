#include "tune/stages.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <limits>

#include <fmt/format.h>

#include "core/error.h"
#include "core/units.h"
#include "diagnosis/evidence.h"
#include "results/store.h"
#include "run/launch.h"
#include "run/resume.h"

namespace wanlab::tune {
namespace {

// The run the database holds under `id`, if any (exactly that id, not a prefix of another).
std::optional<results::RunData> stored(const std::string& out, const std::string& id) {
    const auto db = std::filesystem::path(out) / "results.db";
    if (!std::filesystem::exists(db)) return std::nullopt;
    results::Store store(db, results::Store::Access::read_only);
    for (const auto& r : store.list_runs())
        if (r.id == id) return store.load_run(id);
    return std::nullopt;
}

}  // namespace

double seconds_between(const std::string& from, const std::string& to) {
    auto parse = [](const std::string& s) -> double {
        std::tm tm{};
        const char* end = strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
        if (!end) return std::numeric_limits<double>::quiet_NaN();
        return static_cast<double>(timegm(&tm));
    };
    return parse(to) - parse(from);
}

std::vector<experiment::MadeVariant> variants_of(const experiment::TuneSpec& spec,
                                                 const std::vector<Candidate>& candidates) {
    std::vector<experiment::MadeVariant> out;
    for (const auto& c : candidates) {
        experiment::MadeVariant v{variant_name(spec, c), {}};
        for (std::size_t k = 0; k < spec.space.size(); ++k)
            if (c.choice[k] != kAsWritten) {
                const auto i = static_cast<std::size_t>(c.choice[k]);
                v.values.push_back({spec.space[k].path, spec.space[k].values[i], spec.space[k].value_at[i]});
            }
        out.push_back(std::move(v));
    }
    return out;
}

StageRunner::StageRunner(StageSetup setup, const experiment::TuneSpec& spec) : setup_(std::move(setup)), spec_(spec) {}

StageResult StageRunner::operator()(const StageRequest& req) {
    const std::string id = fmt::format("{}-s{}", setup_.id, req.number);
    runs_.push_back(id);
    auto sets = setup_.sets;
    sets.push_back("run.duration=" + units::format_duration(req.duration));
    if (req.adaptive) {
        sets.push_back("run.repeats=auto");
        sets.push_back(fmt::format("run.min_repeats={}", req.repeats));
    } else {
        sets.push_back(fmt::format("run.repeats={}", req.repeats));
    }
    // The candidates whose values the loader takes together: one refused (a key put back that
    // another needs) is left out and said why, not the stage.
    auto load = [&](const std::vector<experiment::MadeVariant>& variants, std::string* why) {
        Diagnostics diag;
        config::Documents docs;
        auto exp = experiment::load_experiment(setup_.file, setup_.text, sets, experiment::ProfileLibrary::standard(),
                                               docs, diag, &variants);
        if (!exp && why) {
            for (const auto& d : diag.items())
                if (d.severity == Severity::error) {
                    *why = d.message;
                    break;
                }
        }
        return exp;
    };
    const auto all = variants_of(spec_, req.candidates);
    std::vector<std::string> refused(all.size());
    std::vector<experiment::MadeVariant> made = all;
    std::vector<std::size_t> index(all.size());  // made[i] is the request's candidate index[i]
    for (std::size_t i = 0; i < all.size(); ++i) index[i] = i;
    std::string why;
    auto exp = load(made, &why);
    if (!exp) {  // one at a time, only then: which ones cannot be set
        made.clear(), index.clear();
        for (std::size_t i = 0; i < all.size(); ++i) {
            if (!load({all[i]}, &refused[i])) continue;
            made.push_back(all[i]);
            index.push_back(i);
        }
        if (made.empty())
            throw InputError(fmt::format("tune: no candidate of stage {} can be set: {}", req.number, refused[0]));
        exp = load(made, &why);
        if (!exp)
            throw InputError(fmt::format("tune: stage {}'s candidates cannot be loaded together: {}", req.number, why));
    }

    std::optional<results::RunData> data = stored(setup_.out, id);
    if (!data || data->run.status != results::RunStatus::complete) {
        run::RunRequest r;
        r.file = setup_.file;
        r.out = setup_.out;
        r.sets = sets;
        r.quiet = setup_.quiet;
        std::optional<results::RunData> before;
        if (data) {
            before = run::resumable(setup_.out, id, false);
        } else {
            r.run_id = id;
        }
        auto outcome = run::measure_here(r, *exp, setup_.text, before ? &*before : nullptr);
        data = std::move(outcome.data);
        if (data->run.status == results::RunStatus::failed)
            throw Error(fmt::format("tune: stage {} ({}) failed: {}", req.number, id, data->run.error));
    }

    StageResult res;
    res.seconds = seconds_between(data->run.started, data->run.finished);
    if (!std::isfinite(res.seconds)) res.seconds = 0;
    const std::size_t variants = made.size();
    const std::size_t paths = variants ? exp->trials.size() / variants : 0;
    res.candidates.resize(all.size());
    for (std::size_t i = 0; i < all.size(); ++i) {
        auto& m = res.candidates[i];
        m.goal.resize(paths);
        m.constraints.assign(spec_.constraints.size(), std::vector<std::vector<double>>(paths));
        m.refused = refused[i];
    }
    res.baseline_diagnosis.assign(paths, "");
    auto variant_at = [&](const std::string& name) {
        for (std::size_t i = 0; i < made.size(); ++i)
            if (made[i].name == name) return i;
        return made.size();
    };
    for (const auto& t : data->trials) {
        const std::size_t v = variant_at(t.variant);
        if (v == made.size() || t.index == 0) continue;
        const std::size_t path = (t.index - 1) / variants;  // point by point, each point's variants in turn
        if (path >= paths) continue;
        auto& m = res.candidates[index[v]];
        std::size_t planned = 0, got = 0;
        for (const auto& ms : data->measurements) {
            if (ms.trial != t.index) continue;
            if (ms.probe == spec_.goal.probe) {
                ++planned;
                if (auto it = ms.metrics.find(spec_.goal.metric); it != ms.metrics.end() && std::isfinite(it->second)) {
                    m.goal[path].push_back(it->second);
                    ++got;
                }
            }
            for (std::size_t k = 0; k < spec_.constraints.size(); ++k) {
                const auto& c = spec_.constraints[k].metric;
                if (ms.probe != c.probe) continue;
                if (auto it = ms.metrics.find(c.metric); it != ms.metrics.end() && std::isfinite(it->second))
                    m.constraints[k][path].push_back(it->second);
            }
        }
        // A trial that did not finish, or repeats that gave no goal, count as failed.
        if (t.status != results::TrialStatus::done && planned == 0) planned = req.repeats;
        m.failed += planned - std::min(planned, got);
        if (req.candidates[index[v]].baseline()) {
            auto d = diagnosis::diagnose_trial(*data, t);
            for (const auto& p : d.probes)
                if (p.probe == spec_.goal.probe && !p.verdicts.empty() &&
                    p.verdicts.front().role == diagnosis::Role::binding)
                    res.baseline_diagnosis[path] = p.verdicts.front().rule;
        }
    }
    return res;
}

}  // namespace wanlab::tune
