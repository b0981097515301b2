#include "run/resume.h"

#include <algorithm>
#include <sstream>

#include <fmt/format.h>

#include "core/error.h"
#include "core/text.h"
#include "lab/journal.h"
#include "results/store.h"
#include "run/record.h"
#include "run/runner.h"

namespace wanlab::run {

namespace {

constexpr std::size_t kShown = 5;  // differences listed before "and N more"

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
}

/// "line 12 was `duration = \"10s\"`, is now `duration = \"3s\"`".
std::string first_difference(const std::string& was, const std::string& now) {
    auto a = lines_of(was), b = lines_of(now);
    std::size_t i = 0;
    while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
    auto quote = [](const std::vector<std::string>& l, std::size_t i) {
        return i < l.size() ? "`" + text::terminal_safe(l[i]) + "`" : std::string("the end of the file");
    };
    return fmt::format("line {} was {}, is now {}", i + 1, quote(a, i), quote(b, i));
}

std::string describe(const results::Trial& t) {
    std::string s = t.variant;
    for (const auto& [k, v] : t.sweep) s += fmt::format(", {}={}", k, v);
    return fmt::format("{} ({})", t.id, s);
}

}  // namespace

std::vector<results::Session> sessions_of(const results::Run& run) {
    if (!run.sessions.empty()) return run.sessions;
    results::Session s;
    s.started = run.started;
    s.finished = run.finished;
    s.status = run.status;
    s.error = run.error;
    s.hostname = run.env.hostname;
    s.kernel = run.env.kernel;
    s.where = run.env.where;
    return {s};
}

ResumeProblems resume_problems(const results::RunData& stored, const experiment::Experiment& exp,
                               const std::string& text, const std::vector<std::string>& sets, const std::string& shard,
                               const results::Environment& now) {
    ResumeProblems out;
    const auto& run = stored.run;
    // The plan: every trial the run recorded, at its place, with its id.
    std::vector<std::string> moved;
    std::size_t compared = 0;
    for (const auto& t : exp.trials) {
        const auto* was = stored.trial(t.index);
        if (!was) continue;
        ++compared;
        if (was->id != t.id)
            moved.push_back(fmt::format("trial {}: the run measured {}, the file now gives {}", t.index, describe(*was),
                                        describe(trial_record(t))));
    }
    if (exp.trials.size() != stored.trials.size() || compared != stored.trials.size())
        out.refused.push_back(fmt::format("the run planned {} trial{}, the file now gives {}", stored.trials.size(),
                                          stored.trials.size() == 1 ? "" : "s", exp.trials.size()));
    for (std::size_t i = 0; i < moved.size() && i < kShown; ++i) out.refused.push_back(moved[i]);
    if (moved.size() > kShown) out.refused.push_back(fmt::format("and {} more trials", moved.size() - kShown));

    if (text != run.text) out.forceable.push_back("the file's text changed: " + first_difference(run.text, text));
    if (sets != run.sets)
        out.forceable.push_back(
            fmt::format("the run had --set {}, this one {}",
                        run.sets.empty() ? "none" : fmt::format("{}", fmt::join(run.sets, " --set ")),
                        sets.empty() ? "none" : fmt::format("{}", fmt::join(sets, " --set "))));
    if (shard != run.shard)
        out.refused.push_back(fmt::format("the run measured {}, this one {}",
                                          run.shard.empty() ? "every trial" : "shard " + run.shard,
                                          shard.empty() ? "every trial" : "shard " + shard));
    // The conditions: each earlier session's, which --force may already have mixed.
    for (const auto& s : sessions_of(run)) {
        if (s.kernel != now.kernel)
            out.forceable.push_back(fmt::format("kernel {} then, {} now", s.kernel, now.kernel));
        if (s.hostname != now.hostname)
            out.forceable.push_back(fmt::format("machine {} then, {} now", s.hostname, now.hostname));
        if (s.where != now.where)
            out.forceable.push_back(fmt::format("measured on {} then, on {} now", s.where, now.where));
    }
    std::sort(out.forceable.begin(), out.forceable.end());
    out.forceable.erase(std::unique(out.forceable.begin(), out.forceable.end()), out.forceable.end());
    return out;
}

void end_session(results::Run& run) {
    if (run.sessions.empty()) return;
    auto& s = run.sessions.back();
    s.finished = run.finished;
    s.status = run.status;
    s.error = run.error;
}

std::string resume_command(const std::string& file, const std::string& id, const std::string& out) {
    return fmt::format("wanlab run {} --resume {} --out {}", text::shell_quote(file), text::shell_quote(id),
                       text::shell_quote(out));
}

results::RunData resumable(const std::string& out, const std::string& run, bool inside_vm) {
    auto db = std::filesystem::path(out) / "results.db";
    std::error_code ec;
    if (!std::filesystem::exists(db, ec))
        throw InputError(fmt::format("--resume: there is no results database {}: give the --out of the run to continue",
                                     db.string()));
    auto data = results::Store(db, results::Store::Access::read_only).load_run(run.empty() ? "latest" : run);
    const auto& r = data.run;
    if (r.status == results::RunStatus::complete)
        throw InputError(
            fmt::format("--resume: run {} in {} is complete ({} trials done): nothing to resume; its "
                        "report: wanlab results show {} --out {}",
                        r.id, db.string(), r.planned_trials, r.id, text::shell_quote(out)));
    if (r.status == results::RunStatus::running && !inside_vm)
        for (const auto& j : lab::find_journals(lab::kRunDir))
            if (j.run == r.id && j.live())
                throw InputError(
                    fmt::format("--resume: run {} is still running (pid {}): wait for it to end, or stop "
                                "it (kill {}; the machine is restored) and resume it then",
                                r.id, j.pid, j.pid));
    return data;
}

std::string admit_resume(const results::RunData& before, const experiment::Experiment& exp, const ResumeRequest& r,
                         const results::Environment& now) {
    auto p = resume_problems(before, exp, r.text, r.sets, r.shard, now);
    const auto& id = before.run.id;
    if (!p.refused.empty()) {
        std::string msg = fmt::format("--resume: {} does not give the trials run {} planned:", r.file, id);
        for (const auto& x : p.refused) msg += "\n  " + x;
        throw InputError(msg + fmt::format("\nresume with the file that started it (its text is kept: wanlab results "
                                           "show {} --export json --out {}), or start a new run",
                                           id, text::shell_quote(r.out)));
    }
    if (p.forceable.empty()) return "";
    std::string list = fmt::format("{}", fmt::join(p.forceable, "; "));
    if (!r.force)
        throw InputError(
            fmt::format("--resume: run {} would mix measurements taken under different conditions: {}; "
                        "give --force to continue anyway (the report names each session's)",
                        id, list));
    return list + " (--force)";
}

results::RunData resumed_record(const experiment::Experiment& exp, const results::RunData& before) {
    results::RunData data;
    data.run = before.run;
    data.run.status = results::RunStatus::running;
    data.run.error.clear();
    data.run.finished.clear();
    data.run.sessions = sessions_of(before.run);
    if (auto& last = data.run.sessions.back(); last.status == results::RunStatus::running) {  // nobody recorded its end
        last.status = results::RunStatus::killed;
        last.error = "it ended without recording how (kill -9, a reboot, a crash)";
    }
    for (const auto& t : exp.trials) {
        const auto* was = before.trial(t.index);
        if (was && was->id == t.id && was->status == results::TrialStatus::done) {
            data.trials.push_back(*was);
            if (!data.trials.back().session) data.trials.back().session = 1;  // recorded before sessions
            continue;
        }
        data.trials.push_back(trial_record(t));
    }
    for (const auto& m : before.measurements) {
        const auto* t = data.trial(m.trial);
        if (t && t->status == results::TrialStatus::done) data.measurements.push_back(m);
    }
    return data;
}

}  // namespace wanlab::run
