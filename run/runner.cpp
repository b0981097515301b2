#include "run/runner.h"

#include <unistd.h>

#include <algorithm>
#include <exception>
#include <optional>

#include <fmt/format.h>

#include "core/error.h"
#include "core/mounts.h"
#include "core/proc.h"
#include "core/signals.h"
#include "remote/hosts.h"
#include "run/record.h"
#include "run/resume.h"
#include "run/trial.h"
#include "run/trial_files.h"
#include "services/service.h"
#include "sysctl/proc_sys.h"

namespace wanlab::run {
namespace {

using namespace std::chrono_literals;

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
    for (std::size_t at = 0; !from.empty() && (at = s.find(from, at)) != std::string::npos; at += to.size())
        s.replace(at, from.size(), to);
    return s;
}

struct Ending {
    results::RunStatus status;
    std::string error;
    int exit_code;
};

/// How the exception that ended a run ends its record: any exception, since a library's
/// (json, std::stod) left the run "running" forever when only wanlab's were caught.
Ending ending_of(const std::exception_ptr& e) {
    try {
        std::rethrow_exception(e);
    } catch (const sys::Interrupted& x) {
        return {results::RunStatus::interrupted, x.what(), 130};
    } catch (const Error& x) {
        return {results::RunStatus::failed, x.what(), x.exit_code()};
    } catch (const std::exception& x) {
        return {results::RunStatus::failed, x.what(), 1};
    } catch (...) {
        return {results::RunStatus::failed, "an unknown exception", 1};
    }
}

/// The record a new run begins with: its header and every trial planned.
results::RunData fresh_record(const experiment::Experiment& exp, const std::string& text, const RunnerOptions& options,
                              const results::Environment& now) {
    results::RunData data;
    data.run.id = options.run_id.empty() ? lab::new_run_id() : options.run_id;
    data.run.experiment = exp.name;
    data.run.file = exp.file;
    data.run.text = text;
    data.run.sets = exp.sets;
    data.run.baseline = exp.run.baseline.empty() ? exp.variants.front() : exp.run.baseline;
    data.run.planned_trials = exp.trials.size();
    data.run.shard = options.shard;
    data.run.env = now;
    if (exp.run.adaptive) data.run.repeats = {true, exp.run.min_repeats, exp.run.max_repeats, exp.run.precision};
    for (const auto& t : exp.trials) data.trials.push_back(trial_record(t));
    return data;
}

/// The planned seconds of the trials still to measure: all of them (`planned`) and one
/// repeat of each probe (`repeating`, what adaptive repeats forecast from).
struct PlannedTime {
    double planned = 0, repeating = 0;
};
PlannedTime planned_time(const experiment::Experiment& exp, const results::RunData& data) {
    PlannedTime p;
    for (std::size_t i = 0; i < exp.trials.size(); ++i) {
        if (data.trials[i].status == results::TrialStatus::done) continue;
        p.planned += planned_seconds(exp.trials[i], exp.run);
        p.repeating += repeat_seconds(exp.trials[i], exp.run);
    }
    return p;
}

/// What this session of the run records about where it runs.
results::Session this_session(const results::Environment& now, const std::string& note) {
    results::Session s;
    s.hostname = now.hostname;
    s.kernel = now.kernel;
    s.where = now.where;
    s.note = note;
    s.pid = ::getpid();
    s.start_time = sys::process_start_time(::getpid());
    s.boot = results::this_boot();
    return s;
}

SessionRequest session_request(const experiment::Experiment& exp, const RunnerOptions& options, const std::string& run,
                               double planned, Progress& progress, const probes::Tick& tick) {
    SessionRequest r;
    r.run = run;
    r.restore_stale = options.restore_stale;
    r.resume = options.resume != nullptr;
    r.force = options.force;
    r.allow_ssh_commands = options.allow_ssh_commands;
    r.journal_dir = options.journal_dir;
    r.planned_seconds = planned;
    r.sysctl_keys = environment_keys(exp);
    r.log = [&progress](const std::string& s) { progress.line(s); };
    r.progress = [&tick, on_stage = options.on_stage](const std::string& stage) {
        if (on_stage) on_stage(stage);
        if (tick) tick();
    };
    return r;
}

/// The trial loop of one session: every trial not yet done, applied, its services started,
/// measured and recorded; `current` is the trial being measured. Throws once every trial is
/// measured if any failed.
class TrialLoop {
public:
    TrialLoop(const experiment::Experiment& exp, const RunnerOptions& options, results::Store& store,
              Progress& progress, const probes::Tick& tick, results::RunData& data, lab::Session& session, Eta& eta)
        : exp_(exp), options_(options), store_(store), progress_(progress), tick_(tick), data_(data), session_(session),
          eta_(eta), runner_(exp, store, progress, tick, data, eta) {}

    void run(results::Trial*& current) {
        const auto files = options_.files_dir.empty() ? store_.path().parent_path() : options_.files_dir;
        // Services and captures write files as they run: over 9p both are slowed down.
        std::optional<StageDir> stage;
        if (std::any_of(exp_.trials.begin(), exp_.trials.end(), writes_files) && sys::on_network_fs(files))
            stage.emplace();
        std::vector<std::string> failed;
        const std::size_t number = data_.run.sessions.size();
        for (std::size_t i = 0; i < exp_.trials.size(); ++i) {
            if (data_.trials[i].status == results::TrialStatus::done) continue;  // measured by an earlier session
            current = &data_.trials[i];
            current->session = number;
            const auto& t = exp_.trials[i];
            auto keep = trial_dir(files, data_.run.id, t);
            auto work = stage ? trial_dir(stage->path(), data_.run.id, t) : keep;
            if (auto error = trial(t, *current, work, keep, files); !error.empty())
                failed.push_back(fmt::format("trial {} ({}): {}", t.index, t.id, error));
            store_.put_trial(data_.run.id, *current);
            current = nullptr;
            if (options_.on_trial) options_.on_trial(data_);
        }
        if (!failed.empty())
            throw Error(fmt::format("{} of {} trials failed; the first: {}", failed.size(), exp_.trials.size(),
                                    failed.front()));
    }

private:
    /// One trial applied and measured into `rec`; returns why it failed ("" = done).
    std::string trial(const experiment::Trial& t, results::Trial& rec, const std::filesystem::path& work,
                      const std::filesystem::path& keep, const std::filesystem::path& files) {
        session_.apply_trial(t);
        try {
            if (!t.services.empty()) progress_.status(runner_.trial_label(t) + ": starting services", 1s * eta_.done);
            session_.start_services(t, work, tick_);
            runner_.run(
                t, rec, session_.testbed(), [this] { session_.check_services(); }, work,
                keep.lexically_relative(files));
            session_.check_services();
            session_.stop_services();
            move_folder(work, keep);
            rec.status = results::TrialStatus::done;
            return "";
        } catch (const services::ServiceFailure& e) {
            // The trial's own program failed, not the lab: that trial fails, the run goes on.
            session_.stop_services();
            move_folder(work, keep);
            rec.status = results::TrialStatus::failed;
            rec.error = replace_all(e.what(), work.string(), keep.string());
            progress_.line(fmt::format("{}: failed: {}", runner_.trial_label(t), rec.error));
            return rec.error;
        }
    }

    const experiment::Experiment& exp_;
    const RunnerOptions& options_;
    results::Store& store_;
    Progress& progress_;
    const probes::Tick& tick_;
    results::RunData& data_;
    lab::Session& session_;
    Eta& eta_;
    TrialRunner runner_;
};

}  // namespace

std::unique_ptr<lab::Session> open_session(const std::vector<experiment::Trial>& trials, const SessionRequest& request,
                                           results::Environment& env) {
    if (trials.front().lab.mode == experiment::LabSpec::Mode::hosts) {
        remote::HostsOptions ho;
        ho.run = request.run;
        ho.restore_stale = request.restore_stale;
        ho.resume = request.resume;
        ho.allow_ssh_commands = request.allow_ssh_commands;
        // Each machine's watchdog gives it back well after the run should have ended.
        ho.deadline_s = static_cast<unsigned>(std::max(3600.0, 3 * request.planned_seconds + 600));
        ho.progress = request.progress;
        ho.log = request.log;
        auto hosts = std::make_unique<remote::HostsSession>(trials, ho);
        hosts->machines(request.sysctl_keys).get_to(env.machines);
        return hosts;
    }
    lab::SessionOptions so;
    so.run = request.run;
    so.force = request.force;
    so.restore_stale = request.restore_stale;
    so.resume = request.resume;
    so.dir = request.journal_dir;
    so.log = request.log;
    so.progress = request.progress;
    static sysctl::RealProcSys proc;  // stateless: reads and writes /proc/sys
    return std::make_unique<lab::LabSession>(trials, so, proc);
}

int recorded_run(results::Store& store, results::RunData& data,
                 const std::function<void(results::Trial*& current)>& measure, const std::function<void()>& restore,
                 bool resume) {
    if (resume)
        store.resume_run(data.run, data.trials);
    else
        store.begin_run(data.run, data.trials);  // one transaction: one commit per trial cost seconds at 1,000 trials
    int exit_code = 0;
    results::Trial* current = nullptr;
    try {
        measure(current);
        restore();  // before the run counts as complete
        data.run.status = results::RunStatus::complete;
    } catch (...) {
        restore();
        auto end = ending_of(std::current_exception());
        data.run.status = end.status;
        data.run.error = end.error;
        exit_code = end.exit_code;
    }
    if (current) {
        current->status = data.run.status == results::RunStatus::interrupted ? results::TrialStatus::interrupted
                                                                             : results::TrialStatus::failed;
        current->error = data.run.error;
        store.put_trial(data.run.id, *current);
    }
    data.run.finished = utc_now();
    end_session(data.run);
    store.finish_run(data.run);
    return exit_code;
}

Outcome run_experiment(const experiment::Experiment& exp, const std::string& text, const RunnerOptions& options,
                       results::Store& store, Progress& progress, const probes::Tick& tick, const OpenSession& open) {
    Outcome out;
    auto& data = out.data;
    auto now = environment(exp, options.where);
    if (!options.host_env.empty()) now.host = read_host_environment(options.host_env);
    data = options.resume ? resumed_record(exp, *options.resume) : fresh_record(exp, text, options, now);
    const auto time = planned_time(exp, data);
    data.run.sessions.push_back(this_session(now, options.resume_note));
    const std::size_t left = static_cast<std::size_t>(std::count_if(
        data.trials.begin(), data.trials.end(), [](const auto& t) { return t.status != results::TrialStatus::done; }));
    progress.plan(1s * time.planned);

    // Throws before anything is recorded.
    auto session =
        open(exp.trials, session_request(exp, options, data.run.id, time.planned, progress, tick), data.run.env);

    data.run.sessions.back().started = utc_now();
    if (!options.resume) data.run.started = data.run.sessions.back().started;
    Eta eta{0, time.planned, nullptr};
    out.exit_code = recorded_run(
        store, data,
        [&](results::Trial*& current) {
            if (options.resume)
                progress.line(
                    fmt::format("run {} resumed (session {}): {} of {} trials left, about {} of measuring; "
                                "results in {}",
                                data.run.id, data.run.sessions.size(), left, exp.trials.size(),
                                Progress::clock(time.planned), store.path().string()));
            else
                progress.line(fmt::format("run {}: {} trials, about {} of measuring; results in {}", data.run.id,
                                          exp.trials.size(), Progress::clock(time.planned), store.path().string()));
            std::optional<RepeatForecast> forecast;
            if (exp.run.adaptive) forecast.emplace(exp.run.min_repeats, time.repeating);
            eta.forecast = forecast ? &*forecast : nullptr;
            TrialLoop(exp, options, store, progress, tick, data, *session, eta).run(current);
        },
        [&session] { session.reset(); }, options.resume != nullptr);
    return out;
}

}  // namespace wanlab::run
