#include "run/trial.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include <fmt/format.h>

#include "core/placeholders.h"
#include "core/text.h"
#include "diagnosis/counters.h"
#include "diagnosis/qdisc_watch.h"
#include "netem/player.h"
#include "probes/http.h"
#include "probes/probe_spec.h"
#include "probes/sockets.h"
#include "probes/stats.h"
#include "run/check.h"
#include "run/record.h"
#include "run/schedule_check.h"

namespace wanlab::run {
namespace {

using namespace std::chrono_literals;

// The link's configured figures as series beside the measured ones (link.up.rate, bit/s;
// link.up.delay, s; link.up.loss, fraction): [link]'s at 0, then each change at the instant
// the kernel acknowledged it, and the state in force when the schedule stopped. A step
// series: each value holds until the next. Times count from the schedule's start, which is
// the measurement's within the time it takes to start the probe.
void add_schedule_series(probes::SeriesMap& out, const netem::Schedule& schedule, const netem::PlayLog& log) {
    for (const char* dir : {"up", "down"}) {
        auto state = [&](std::size_t step) -> const netem::Direction& { return schedule.steps[step].of(dir); };
        if (!state(0).scheduled) continue;
        probes::Series rate, delay, loss;
        auto add = [&](double t, std::size_t step) {
            auto f = netem::figures_of(state(step));
            rate.add(t, f.rate);
            delay.add(t, f.delay);
            if (f.loss >= 0) loss.add(t, f.loss);
        };
        add(0, 0);
        std::size_t last = 0;
        for (const auto& c : log.changes)
            if (c.direction == dir || c.direction == "both") {
                add(c.applied, c.step);
                last = c.step;
            }
        add(std::max(log.ended, rate.t.back()), last);
        const std::string prefix = fmt::format("link.{}.", dir);
        out[prefix + "rate"] = std::move(rate);
        out[prefix + "delay"] = std::move(delay);
        if (loss.size()) out[prefix + "loss"] = std::move(loss);
    }
}

// How late the schedule's changes came, beside the counters: {"changes": n, "late_median":
// s, "late_p99": s, "late_max": s}, and why it stopped early, if it did.
nlohmann::json schedule_counters(const netem::PlayLog& log) {
    auto late = netem::lateness_of(log);
    nlohmann::json j{
        {"changes", late.changes}, {"late_median", late.median}, {"late_p99", late.p99}, {"late_max", late.max}};
    if (!log.error.empty()) j["error"] = log.error;
    return j;
}

std::string point_text(const experiment::Trial& t) {
    std::string s;
    for (const auto& [k, v] : t.sweep) s += fmt::format("{}{}={}", s.empty() ? "" : " ", k, v);
    return s;
}

}  // namespace

bool checks_emulation(const experiment::Trial& t) {
    auto e = expected_of(t);
    return lab::unverifiable(t.lab).empty() && (e.rtt > 0 || e.rate_up > 0 || e.rate_down > 0);
}

bool warms_up(const probes::ProbeSpec& p) { return probes::traits_of(p.kind).warms_up; }

double longest(const probes::ProbeGroup& g) {
    double s = 0;
    for (const auto* p : g.members) s = std::max(s, probes::planned_seconds(*p));
    return s;
}

std::pair<probes::ProbeSpec, probes::Endpoints> in_lab(const probes::ProbeSpec& spec, probes::Endpoints where) {
    probes::ProbeSpec out = spec;
    std::map<std::string, std::string> addresses{{"server", where.server.address}, {"client", where.client.address}};
    if (auto url = out.options.find("url"); url != out.options.end()) {
        // In a URL an IPv6 address goes in brackets: http://{server}:8080/ -> http://[2001:2::6]:8080/
        auto& text = std::get<std::string>(url->second);
        text = text::expand(text,
                            {{"server", probes::http::url_host(where.server.address)},
                             {"client", probes::http::url_host(where.client.address)}},
                            "url");
    }
    for (auto& word : out.command) word = text::expand(word, addresses, "command");
    if (auto port = out.options.find("server_port"); port != out.options.end()) {
        if (auto p = std::get<std::int64_t>(port->second); p > 0) {
            where.server.remote = true;  // a [[service]] listens there
            where.server.port = static_cast<std::uint16_t>(p);
        }
    }
    return {std::move(out), std::move(where)};
}

void TrialRunner::run(const experiment::Trial& t, results::Trial& rec, const lab::Testbed& testbed,
                      const std::function<void()>& between, const std::filesystem::path& work,
                      const std::filesystem::path& kept) {
    const auto label = trial_label(t);
    check(t, label, rec, testbed);
    store_.put_trial(data_.run.id, rec);
    schedule_misses_.clear();
    schedule_held_ = 0;
    schedule_late_p99_ = schedule_late_max_ = 0;
    for (const auto& group : probes::probe_groups(t.probes)) {
        auto members = members_of(group, testbed);
        // Progress names a group by its name, a lone probe by the probe's.
        const auto name = group.name.empty() ? members.front().spec.name : group.name;
        warm_up(label, name, members, testbed);
        for (auto& m : members) m.captures = start_captures(m.spec, testbed, work);
        repeats(t, label, name, group, members, testbed, between);
        keep_captures(members, rec, kept);
    }
    // A schedule that did not hold flags the trial as a failed emulation check does; one
    // that held says so beside the check, with how late its changes landed.
    if (schedule_misses_.empty() && schedule_held_ > 0) {
        rec.check.note +=
            fmt::format("{}the link's schedule held in {} (its changes at most {:.2f} ms late, p99 {:.2f} ms)",
                        rec.check.note.empty() ? "" : "; ",
                        schedule_held_ == 1 ? std::string("its one measurement")
                                            : fmt::format("all {} measurements", schedule_held_),
                        schedule_late_max_ * 1e3, schedule_late_p99_ * 1e3);
        store_.put_trial(data_.run.id, rec);
    }
    if (!schedule_misses_.empty()) {
        rec.check.checked = true;
        rec.check.held = false;
        rec.check.note += fmt::format("{}the link's schedule did not hold in {} measurement{}: {}",
                                      rec.check.note.empty() ? "" : "; ", schedule_misses_.size(),
                                      schedule_misses_.size() == 1 ? "" : "s", schedule_misses_.front());
        store_.put_trial(data_.run.id, rec);
    }
}

/// The emulation check, when the trial has conditions a measurement can compare with.
void TrialRunner::check(const experiment::Trial& t, const std::string& label, results::Trial& rec,
                        const lab::Testbed& testbed) {
    if (checks_emulation(t)) progress_.status(label + ": checking the emulation", 1s * eta_.done);
    if (auto why = lab::unverifiable(t.lab); !why.empty())
        rec.check.note = why;  // apply_trial() has read the qdiscs back
    else
        rec.check = check_emulation(t, testbed.endpoints(AF_UNSPEC), tick_);
    if (checks_emulation(t)) eta_.done += kCheckSeconds;  // planned_seconds() counts it: so must the ETA
    if (rec.check.checked && !rec.check.held)
        progress_.line(fmt::format("{}: emulation did not hold: {}", label, rec.check.note));
}

/// The group's probes as they measure in this lab; refuses a kind and tool it cannot measure
/// before any repeat.
std::vector<TrialRunner::Member> TrialRunner::members_of(const probes::ProbeGroup& group,
                                                         const lab::Testbed& testbed) const {
    std::vector<Member> members;
    for (const auto* written : group.members) {
        auto [spec, where] = in_lab(*written, testbed.endpoints(probes::probe_family(*written)));
        probes::make_probe(spec);
        members.push_back({std::move(spec), std::move(where), {}});
    }
    return members;
}

/// The repeats of one probe or group, each followed by the cooldown; with adaptive repeats,
/// their count decided after the first ones.
void TrialRunner::repeats(const experiment::Trial& t, const std::string& label, const std::string& name,
                          const probes::ProbeGroup& group, std::vector<Member>& members, const lab::Testbed& testbed,
                          const std::function<void()>& between) {
    const auto& rule = exp_.run;
    const auto sites = testbed.qdisc_sites(t);
    unsigned repeats = rule.first_repeats();
    bool decided = !rule.adaptive;
    for (unsigned r = 1; r <= repeats; ++r) {
        progress_.status(fmt::format("{}: {} repeat {}/{}{}", label, name, r, repeats, decided ? "" : "+"),
                         1s * eta_.done);
        measure(t, label, group.name, members, r, testbed, sites);
        if (between) between();
        eta_.done += longest(group);
        probes::sleep_until(probes::Clock::now() + rule.cooldown, tick_);
        eta_.done += ns_to_s(rule.cooldown.count());
        if (!decided && r == repeats) {
            decided = true;
            repeats = repeats_needed(t, group, members);
            if (eta_.forecast) {
                eta_.planned += eta_.forecast->decided(longest(group) + ns_to_s(rule.cooldown.count()), repeats);
                progress_.plan(1s * eta_.planned);
            }
        }
    }
}

/// Ends the members' captures and records each in the trial (stored again if any).
void TrialRunner::keep_captures(std::vector<Member>& members, results::Trial& rec, const std::filesystem::path& kept) {
    bool captured = false;
    for (auto& m : members)
        for (auto& c : m.captures) {
            auto done = c->finish();
            done.probe = m.spec.name;
            done.path = (kept / std::filesystem::path(done.path).filename()).string();
            rec.captures.push_back(std::move(done));
            captured = true;
        }
    if (captured) store_.put_trial(data_.run.id, rec);
}

/// The warm-up of one probe, or of a group's members together: [run] warmup of traffic,
/// discarded (none for the kinds that carry no state to warm).
void TrialRunner::warm_up(const std::string& label, const std::string& name, const std::vector<Member>& members,
                          const lab::Testbed& testbed) {
    if (exp_.run.warmup.count() <= 0) return;
    std::vector<probes::GroupJob> jobs;
    for (const auto& m : members) {
        if (!warms_up(m.spec)) continue;
        auto warm = m.spec;
        warm.options["duration"] = static_cast<std::int64_t>(exp_.run.warmup.count());
        jobs.push_back([&testbed, warm, where = m.where](const probes::Tick& tick) {
            return testbed.run_probe(warm, testbed.measure(warm, where), tick);
        });
    }
    if (jobs.empty()) return;
    progress_.status(fmt::format("{}: {} warm-up", label, name), 1s * eta_.done);
    try {
        if (jobs.size() == 1)
            jobs.front()(tick_);
        else
            probes::run_together(jobs, tick_);
    } catch (const probes::MeasurementError&) {
        // The repeats meet the same refusal and record it.
    }
    eta_.done += ns_to_s(exp_.run.warmup.count());
}

/// Repeat `r` of one probe, or of a group's members at the same time (`group` its name),
/// each measurement committed as taken; a group's own record after its members'. The
/// counters and queue statistics are the interval's, on each member's record.
void TrialRunner::measure(const experiment::Trial& t, const std::string& label, const std::string& group,
                          std::vector<Member>& members, unsigned r, const lab::Testbed& testbed,
                          const std::vector<netem::QdiscSite>& sites) {
    auto started = utc_now();
    const bool here = testbed.probes_here();
    diagnosis::Snapshot counters(
        here ? diagnosis::counted_hosts(members.front().where) : std::vector<std::pair<std::string, std::string>>{},
        here);
    auto machines = testbed.machine_counters();
    std::vector<probes::GroupJob> jobs;
    for (const auto& m : members) {
        auto measured = testbed.measure(m.spec, m.where);  // hosts mode: the probe's server there
        jobs.push_back([&testbed, &spec = m.spec, measured](const probes::Tick& tick) {
            return testbed.run_probe(spec, measured, tick);
        });
    }
    std::optional<diagnosis::QdiscWatch> qdiscs;
    if (!sites.empty()) qdiscs.emplace(sites, diagnosis::kQdiscSampleEvery);
    // The schedule's clock starts with each repeat, so every repeat sees the same link.
    std::optional<netem::SchedulePlayer> player;
    if (!t.schedule.empty()) {
        player.emplace(t.schedule, netem::open_sites(sites), t.lab.mtu, netem::Psched::from_proc());
        player->start();
    }
    std::vector<probes::JobOutcome> outcomes(1);
    if (jobs.size() == 1) {
        try {
            outcomes[0].result = jobs[0](tick_);
        } catch (const probes::MeasurementError& e) {
            outcomes[0].error = e.what();
        }
    } else {
        outcomes = probes::run_together(jobs, tick_);
    }
    // The link's last sample before the schedule puts [link] back.
    const diagnosis::QdiscTally* tally = qdiscs ? &qdiscs->finish() : nullptr;
    std::optional<netem::PlayLog> played;
    if (player) {
        played = player->finish();
        if (!played->error.empty())
            progress_.line(fmt::format("{}: repeat {}: the link's schedule stopped {}", label, r, played->error));
    }
    nlohmann::json delta = counters.delta();
    diagnosis::add_machine_deltas(delta, machines, testbed.machine_counters());
    if (played) delta["schedule"] = schedule_counters(*played);
    if (tally) delta["qdisc"] = tally->counters();
    std::vector<probes::MemberRun> runs;
    for (std::size_t i = 0; i < members.size(); ++i) {
        const auto& spec = members[i].spec;
        auto& o = outcomes[i];
        results::Measurement m;
        if (o.result) {
            if (!group.empty()) {
                probes::align_series(*o.result, o.released);
                if (auto load = load_beside(members, spec); !load.empty())
                    o.result->notes.push_back(
                        fmt::format("{}beside {} in group {}", probes::kUnderLoadNote, load, group));
            }
            m = record_of(spec, *o.result, t.index, r, started);
            m.counters = delta;
            if (tally) tally->add_series(m.series);
            if (played) {
                add_schedule_series(m.series, t.schedule, *played);
                auto held = check_schedule(t.schedule, *played, m.series, t.lab.mtu);
                m.counters["schedule"]["held"] = held.held;
                m.counters["schedule"]["windows"] = held.windows;
                m.counters["schedule"]["rtts"] = held.rtts;
                m.counters["schedule"]["check"] = held.note;
                m.counters["schedule"]["allowed"] = to_json(in_force_over(t.schedule, *played, m.series));
                if (auto phases = phases_of(t.schedule, *played, m.series); !phases.empty())
                    m.counters["schedule"]["phases"] = std::move(phases);
                if (!played->error.empty())
                    m.notes.push_back("the link's schedule stopped " + played->error +
                                      "; the rest ran on what it had set");
                if (held.held) {
                    ++schedule_held_;
                    auto late = netem::lateness_of(*played);
                    schedule_late_p99_ = std::max(schedule_late_p99_, late.p99);
                    schedule_late_max_ = std::max(schedule_late_max_, late.max);
                } else {
                    m.notes.push_back("the link's schedule did not hold: " + held.note);
                    schedule_misses_.push_back(fmt::format("{} repeat {}: {}", spec.name, r, held.note));
                    progress_.line(fmt::format("{}: {} repeat {}: the link's schedule did not hold: {}", label,
                                               spec.name, r, held.note));
                }
            }
        } else {
            // The tool refused this measurement, not the lab: recorded, and the run goes on.
            m = record_of(spec, probes::ProbeResult{}, t.index, r, started);
            m.notes.push_back(std::string(results::kErrorNote) + o.error);
            progress_.line(fmt::format("{}: {} repeat {}: {}", label, spec.name, r, o.error));
        }
        runs.push_back({&spec, std::move(o.result), o.error});
        commit(std::move(m));
    }
    if (group.empty()) return;
    probes::ProbeSpec record;
    record.name = group;
    record.kind = probes::group_kind().name;
    auto g = record_of(record, probes::group_result(runs), t.index, r, started);
    g.counters = delta;
    if (tally) tally->add_series(g.series);
    if (played) add_schedule_series(g.series, t.schedule, *played);
    commit(std::move(g));
}

/// [run] repeats = "auto": the repeats in all that Stein's rule asks of this probe or
/// group, from its first ones: the most any settled metric asks (each member's main
/// metric, a command probe's first own metric instead of its wall time, and every metric
/// an [[assert]] names of a member or of the group).
unsigned TrialRunner::repeats_needed(const experiment::Trial& t, const probes::ProbeGroup& group,
                                     const std::vector<Member>& members) {
    const auto& rule = exp_.run;
    std::vector<std::pair<std::string, std::string>> settle;  // (probe, metric)
    for (const auto& m : members)
        if (probes::traits_of(m.spec.kind).user_command && !m.spec.outputs.empty())  // the program's own number
            settle.emplace_back(m.spec.name, m.spec.outputs.front().name);
        else if (const char* main = probes::main_metric(m.spec.kind))
            settle.emplace_back(m.spec.name, main);
    for (const auto& a : exp_.asserts) {
        bool ours = a.probe == group.name && !group.name.empty();
        for (const auto& m : members) ours = ours || a.probe == m.spec.name;
        if (ours) settle.emplace_back(a.probe, a.metric);
    }
    std::size_t need = rule.min_repeats;
    for (const auto& [probe, metric] : settle)
        need =
            std::max(need, probes::stats::stein_repeats(data_.first_repeats(t.index, probe, metric, rule.min_repeats),
                                                        rule.precision, rule.max_repeats));
    return static_cast<unsigned>(need);
}

/// The throughput probes of the group other than `self`, "a, b" ("" = none).
std::string TrialRunner::load_beside(const std::vector<Member>& members, const probes::ProbeSpec& self) {
    std::string out;
    for (const auto& m : members)
        if (probes::traits_of(m.spec.kind).bulk_tcp && m.spec.name != self.name)
            out += (out.empty() ? "" : ", ") + m.spec.name;
    return out;
}

void TrialRunner::commit(results::Measurement m) {
    store_.add_measurement(data_.run.id, m);
    data_.measurements.push_back(std::move(m));
}

/// One capture per lab host for a probe that asks for them (none otherwise).
std::vector<std::unique_ptr<diagnosis::Capture>> TrialRunner::start_captures(const probes::ProbeSpec& spec,
                                                                             const lab::Testbed& testbed,
                                                                             const std::filesystem::path& work) {
    std::vector<std::unique_ptr<diagnosis::Capture>> out;
    auto bounds = diagnosis::capture_bounds(spec);
    if (!bounds) return out;
    std::filesystem::create_directories(work);
    for (const auto& p : testbed.capture_points())
        out.push_back(std::make_unique<diagnosis::Capture>(
            p.host, p.netns, p.dev, p.filter, work / fmt::format("capture-{}-{}.pcap", spec.name, p.host), *bounds));
    return out;
}

std::string TrialRunner::trial_label(const experiment::Trial& t) const {
    return fmt::format("[{}/{}] {}{}{}", t.index, exp_.trials.size(), t.variant, t.sweep.empty() ? "" : " ",
                       point_text(t));
}

}  // namespace wanlab::run
