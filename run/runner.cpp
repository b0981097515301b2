#include "run/runner.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <exception>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "core/error.h"
#include "core/signals.h"
#include "core/version.h"
#include "lab/session.h"
#include "lab/testbed.h"
#include "probes/sys.h"
#include "run/check.h"
#include "sysctl/proc_sys.h"

namespace wanlab::run {
namespace {

using namespace std::chrono_literals;

// What an emulation check is planned to take (its RTT and rate measurements), for the ETA.
constexpr double kCheckSeconds = 2;

double ns_to_s(std::int64_t ns) { return static_cast<double>(ns) / 1e9; }

// The keys a report needs to explain buffer effects, recorded even when no trial sets them.
const char* const kUsualKeys[] = {
    "net.core.rmem_max",     "net.core.wmem_max", "net.core.rmem_default",           "net.core.wmem_default",
    "net.ipv4.tcp_rmem",     "net.ipv4.tcp_wmem", "net.ipv4.tcp_congestion_control", "net.ipv4.tcp_adv_win_scale",
    "net.core.default_qdisc"};

double probe_seconds(const probes::ProbeSpec& p) {
    auto d = p.options.find("duration");
    double s = d != p.options.end() ? ns_to_s(std::get<std::int64_t>(d->second)) : 0;
    auto count = p.options.find("count"), interval = p.options.find("interval");
    if (count != p.options.end() && interval != p.options.end())
        s = std::min(s, static_cast<double>(std::get<std::int64_t>(count->second)) *
                            ns_to_s(std::get<std::int64_t>(interval->second)));
    return s;
}

bool warms_up(const probes::ProbeSpec& p) { return p.kind != "rtt"; }

// Whether the trial gets an emulation check: it has link conditions, on a testbed where the
// configured RTT and rate can be compared with a measurement.
bool checks_emulation(const lab::Trial& t) {
    auto e = expected_of(t);
    return lab::unverifiable(t.lab).empty() && (e.rtt > 0 || e.rate_up > 0 || e.rate_down > 0);
}

std::string point_text(const lab::Trial& t) {
    std::string s;
    for (const auto& [k, v] : t.sweep) s += fmt::format("{}{}={}", s.empty() ? "" : " ", k, v);
    return s;
}

results::Measurement record_of(const probes::ProbeSpec& spec, const probes::ProbeResult& r, std::size_t trial,
                               unsigned repeat, const std::string& started) {
    results::Measurement m;
    m.trial = trial;
    m.probe = spec.name;
    m.kind = r.kind.empty() ? spec.kind : r.kind;
    m.tool = r.tool;
    m.repeat = repeat;
    m.started = started;
    m.metrics = r.metrics;
    m.samples = r.samples;
    m.notes = r.notes;
    for (const auto& c : r.connections)
        m.connections.push_back(
            {{"direction", c.direction}, {"congestion_control", c.congestion_control}, {"values", c.values}});
    return m;
}

// Everything one trial does once the lab holds its configuration.
class TrialRunner {
public:
    TrialRunner(const lab::Experiment& exp, results::Store& store, Progress& progress, const probes::Tick& tick,
                results::RunData& data, double& done)
        : exp_(exp), store_(store), progress_(progress), tick_(tick), data_(data), done_(done) {}

    void run(const lab::Trial& t, results::Trial& rec, const lab::Testbed& testbed) {
        auto label = fmt::format("[{}/{}] {}{}{}", t.index, exp_.trials.size(), t.variant, t.sweep.empty() ? "" : " ",
                                 point_text(t));
        const auto where = testbed.endpoints();
        if (checks_emulation(t)) progress_.status(label + ": checking the emulation", 1s * done_);
        if (auto why = lab::unverifiable(t.lab); !why.empty())
            rec.check.note = why;  // apply_trial() has read the qdiscs back
        else
            rec.check = check_emulation(t, where, tick_);
        if (checks_emulation(t)) done_ += kCheckSeconds;  // planned_seconds() counts it: so must the ETA
        if (rec.check.checked && !rec.check.held)
            progress_.line(fmt::format("{}: emulation did not hold: {}", label, rec.check.note));
        store_.put_trial(data_.run.id, rec);
        for (const auto& spec : t.probes) {
            auto probe = probes::make_probe(spec);
            if (exp_.run.warmup.count() > 0 && warms_up(spec)) {
                progress_.status(fmt::format("{}: {} warm-up", label, spec.name), 1s * done_);
                auto warm = spec;
                warm.options["duration"] = static_cast<std::int64_t>(exp_.run.warmup.count());
                try {
                    probes::make_probe(warm)->run(where, tick_);
                } catch (const probes::MeasurementError&) {
                    // The repeats meet the same refusal and record it.
                }
                done_ += ns_to_s(exp_.run.warmup.count());
            }
            for (unsigned r = 1; r <= exp_.run.repeats; ++r) {
                progress_.status(fmt::format("{}: {} repeat {}/{}", label, spec.name, r, exp_.run.repeats), 1s * done_);
                auto started = utc_now();
                results::Measurement m;
                try {
                    m = record_of(spec, probe->run(where, tick_), t.index, r, started);
                } catch (const probes::MeasurementError& e) {
                    // The tool refused this measurement, not the lab: recorded, and the run goes on.
                    m = record_of(spec, probes::ProbeResult{}, t.index, r, started);
                    m.notes.push_back(std::string(results::kErrorNote) + e.what());
                    progress_.line(fmt::format("{}: {} repeat {}: {}", label, spec.name, r, e.what()));
                }
                store_.add_measurement(data_.run.id, m);
                data_.measurements.push_back(std::move(m));
                done_ += probe_seconds(spec);
                probes::sleep_until(probes::Clock::now() + exp_.run.cooldown, tick_);
                done_ += ns_to_s(exp_.run.cooldown.count());
            }
        }
    }

private:
    const lab::Experiment& exp_;
    results::Store& store_;
    Progress& progress_;
    const probes::Tick& tick_;
    results::RunData& data_;
    double& done_;
};

struct Ending {
    std::string status, error;
    int exit_code;
};

/// How the exception that ended a run ends its record: any exception, since a library's
/// (json, std::stod) left the run "running" forever when only wanlab's were caught.
Ending ending_of(const std::exception_ptr& e) {
    try {
        std::rethrow_exception(e);
    } catch (const sys::Interrupted& x) {
        return {"interrupted", x.what(), 130};
    } catch (const Error& x) {
        return {"failed", x.what(), x.exit_code()};
    } catch (const std::exception& x) {
        return {"failed", x.what(), 1};
    } catch (...) {
        return {"failed", "an unknown exception", 1};
    }
}

}  // namespace

std::string utc_now() {
    std::time_t now = std::time(nullptr);
    std::tm tm{};
    ::gmtime_r(&now, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

double planned_seconds(const lab::Trial& t, const lab::RunSpec& run) {
    double s = checks_emulation(t) ? kCheckSeconds : 0;
    for (const auto& p : t.probes)
        s += (warms_up(p) ? ns_to_s(run.warmup.count()) : 0) +
             run.repeats * (probe_seconds(p) + ns_to_s(run.cooldown.count()));
    return s;
}

results::Trial trial_record(const lab::Trial& t) {
    results::Trial r;
    r.index = t.index;
    r.id = t.id;
    r.variant = t.variant;
    r.sweep = t.sweep;
    auto e = expected_of(t);
    r.link_rtt = e.rtt;
    std::set<double> rates;
    for (double v : {e.rate_up, e.rate_down})
        if (v > 0) rates.insert(v);
    r.link_rate = rates.empty() ? results::kNaN : *rates.begin();
    r.link_loss = t.link.up.netem.loss.model == netem::Loss::Model::random ? t.link.up.netem.loss.probability : 0.0;
    for (const auto& s : t.sysctl.global) r.sysctls[s.key] = s.value;
    for (const auto& [host, settings] : t.sysctl.per_host)
        for (const auto& s : settings) r.sysctls[host + ":" + s.key] = s.value;
    return r;
}

results::Environment environment(const lab::Experiment& exp, const std::string& where) {
    results::Environment env;
    utsname u{};
    if (::uname(&u) == 0) {
        env.hostname = u.nodename;
        env.kernel = u.release;
        env.machine = u.machine;
    }
    env.wanlab_version = kVersion;
    env.where = where;
    std::set<std::string> keys(std::begin(kUsualKeys), std::end(kUsualKeys));
    for (const auto& t : exp.trials) {
        for (const auto& s : t.sysctl.global) keys.insert(s.key);
        for (const auto& [host, settings] : t.sysctl.per_host)
            for (const auto& s : settings) keys.insert(s.key);
    }
    sysctl::RealProcSys proc;
    for (const auto& k : keys)
        if (auto v = proc.read("", k)) env.sysctls_before[k] = *v;
    return env;
}

int recorded_run(results::Store& store, results::RunData& data,
                 const std::function<void(results::Trial*& current)>& measure, const std::function<void()>& restore) {
    store.begin_run(data.run, data.trials);  // one transaction: one commit per trial cost seconds at 1,000 trials
    int exit_code = 0;
    results::Trial* current = nullptr;
    try {
        measure(current);
        restore();  // before the run counts as complete
        data.run.status = "complete";
    } catch (...) {
        restore();
        auto end = ending_of(std::current_exception());
        data.run.status = end.status;
        data.run.error = end.error;
        exit_code = end.exit_code;
    }
    if (current) {
        current->status = data.run.status == "interrupted" ? "interrupted" : "failed";
        current->error = data.run.error;
        store.put_trial(data.run.id, *current);
    }
    data.run.finished = utc_now();
    store.finish_run(data.run.id, data.run.status, data.run.finished, data.run.error);
    return exit_code;
}

Outcome run_experiment(const lab::Experiment& exp, const std::string& text, const RunnerOptions& options,
                       results::Store& store, Progress& progress, const probes::Tick& tick) {
    Outcome out;
    auto& data = out.data;
    data.run.id = options.run_id.empty() ? lab::new_run_id() : options.run_id;
    data.run.experiment = exp.name;
    data.run.file = exp.file;
    data.run.text = text;
    data.run.sets = exp.sets;
    data.run.baseline = exp.run.baseline.empty() ? exp.variants.front() : exp.run.baseline;
    data.run.planned_trials = exp.trials.size();
    data.run.env = environment(exp, options.where);
    double planned = 0;
    for (const auto& t : exp.trials) {
        planned += planned_seconds(t, exp.run);
        data.trials.push_back(trial_record(t));
    }
    progress.plan(1s * planned);

    sysctl::RealProcSys proc;
    lab::SessionOptions so;
    so.run = data.run.id;
    so.force = options.force;
    so.restore_stale = options.restore_stale;
    so.dir = options.journal_dir;
    so.log = [&progress](const std::string& s) { progress.line(s); };
    so.progress = [&tick, &options](const std::string& stage) {
        if (options.on_stage) options.on_stage(stage);
        if (tick) tick();
    };
    std::optional<lab::LabSession> session;
    session.emplace(exp.trials, so, proc);  // throws before anything is recorded

    data.run.started = utc_now();
    double done = 0;
    out.exit_code = recorded_run(
        store, data,
        [&](results::Trial*& current) {
            progress.line(fmt::format("run {}: {} trials, about {} of measuring; results in {}", data.run.id,
                                      exp.trials.size(), Progress::clock(planned), store.path().string()));
            TrialRunner runner(exp, store, progress, tick, data, done);
            for (std::size_t i = 0; i < exp.trials.size(); ++i) {
                current = &data.trials[i];
                session->apply_trial(exp.trials[i]);
                runner.run(exp.trials[i], *current, session->testbed());
                current->status = "done";
                store.put_trial(data.run.id, *current);
                current = nullptr;
            }
        },
        [&session] { session.reset(); });
    return out;
}

}  // namespace wanlab::run
