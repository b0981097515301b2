#include "run/runner.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <ctime>
#include <exception>
#include <optional>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "core/error.h"
#include "core/placeholders.h"
#include "core/signals.h"
#include "core/sys.h"
#include "core/text.h"
#include "core/version.h"
#include "diagnosis/capture.h"
#include "diagnosis/counters.h"
#include "diagnosis/qdisc_watch.h"
#include "lab/session.h"
#include "lab/testbed.h"
#include "probes/group.h"
#include "probes/http.h"
#include "probes/probe_spec.h"
#include "probes/stats.h"
#include "probes/sys.h"
#include "remote/hosts.h"
#include "run/check.h"
#include "run/resume.h"
#include "services/service.h"
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

// rtt and udp probes carry no state to warm (no congestion window); a command's warm-up is
// the user's (a command has no duration to shorten).
bool warms_up(const probes::ProbeSpec& p) { return p.kind != "rtt" && p.kind != "udp" && p.kind != "command"; }

// Whether the trial gets an emulation check: it has link conditions, on a testbed where the
// configured RTT and rate can be compared with a measurement.
bool checks_emulation(const lab::Trial& t) {
    auto e = expected_of(t);
    return lab::unverifiable(t.lab).empty() && (e.rtt > 0 || e.rate_up > 0 || e.rate_down > 0);
}

// The seconds a repeat of a probe, or of a group's members together, is planned to take.
double longest(const probes::ProbeGroup& g) {
    double s = 0;
    for (const auto* p : g.members) s = std::max(s, probes::planned_seconds(*p));
    return s;
}

std::string point_text(const lab::Trial& t) {
    std::string s;
    for (const auto& [k, v] : t.sweep) s += fmt::format("{}{}={}", s.empty() ? "" : " ", k, v);
    return s;
}

}  // namespace

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
    m.series = r.series;
    m.notes = r.notes;
    for (const auto& c : r.connections)
        m.connections.push_back(
            {{"direction", c.direction}, {"congestion_control", c.congestion_control}, {"values", c.values}});
    return m;
}

std::string mount_type(const std::string& mountinfo, const std::filesystem::path& dir) {
    // One line per mount: "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - TYPE SOURCE ..."
    // (proc(5)); a mount point's space, tab, newline and backslash are octal escapes. The
    // last matching line wins: a later mount over the same point hides the earlier ones.
    auto unescape = [](const std::string& s) {
        std::string out;
        for (std::size_t i = 0; i < s.size(); ++i)
            if (s[i] == '\\' && i + 3 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1]))) {
                out += static_cast<char>(std::stoi(s.substr(i + 1, 3), nullptr, 8));
                i += 3;
            } else {
                out += s[i];
            }
        return out;
    };
    auto inside = [](const std::string& path, const std::string& point) {
        if (point == "/") return true;
        return path == point || (path.starts_with(point) && path[point.size()] == '/');
    };
    std::string path = dir.lexically_normal().string();
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    std::string type;
    std::size_t best = 0;
    std::istringstream lines(mountinfo);
    for (std::string line; std::getline(lines, line);) {
        auto w = text::words(line);
        auto dash = std::find(w.begin(), w.end(), "-");
        if (w.size() < 5 || dash == w.end() || dash + 1 == w.end()) continue;
        auto point = unescape(w[4]);
        if (!inside(path, point) || point.size() < best) continue;
        best = point.size();
        type = *(dash + 1);
    }
    return type;
}

bool on_network_fs(const std::filesystem::path& dir) {
    // By the mount's type, not statfs(): a 9p mount reports the f_type of the host's file
    // system behind it (ext4 in the micro-VM), so statfs cannot tell it from a local disk.
    std::error_code ec;
    auto real = std::filesystem::weakly_canonical(std::filesystem::absolute(dir, ec), ec);
    std::string info;
    try {
        info = sys::read_file("/proc/self/mountinfo", 4 << 20, "reading the mounts");
    } catch (const Error&) {
        return false;
    }
    auto type = mount_type(info, ec ? dir : real);
    static const std::set<std::string> kNetwork = {"9p",    "nfs",  "nfs4",     "cifs", "smb3",
                                                   "smbfs", "ceph", "virtiofs", "afs"};
    return kNetwork.count(type) > 0 || type == "fuse" || type.starts_with("fuse.");
}

std::filesystem::path trial_dir(const std::filesystem::path& files_dir, const std::string& run, const lab::Trial& t) {
    return files_dir / run / fmt::format("trial-{}-{}", t.index, t.id);
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

namespace {

// Everything one trial does once the lab holds its configuration.
class TrialRunner {
public:
    /// `done` and `planned` are the run's planned seconds covered and in all (the ETA's);
    /// adaptive repeats correct `planned` through `forecast` as each probe decides its count.
    TrialRunner(const lab::Experiment& exp, results::Store& store, Progress& progress, const probes::Tick& tick,
                results::RunData& data, double& done, double& planned, RepeatForecast* forecast)
        : exp_(exp), store_(store), progress_(progress), tick_(tick), data_(data), done_(done), planned_(planned),
          forecast_(forecast) {}

    /// `between` runs after each measurement (the services' liveness check); it may throw.
    /// Captures are written into `work` (the trial's folder, maybe staged) and recorded as
    /// `kept`/NAME (the folder's path relative to the results folder).
    void run(const lab::Trial& t, results::Trial& rec, const lab::Testbed& testbed,
             const std::function<void()>& between, const std::filesystem::path& work,
             const std::filesystem::path& kept) {
        auto label = trial_label(t);
        const auto lab_where = testbed.endpoints(AF_UNSPEC);
        if (checks_emulation(t)) progress_.status(label + ": checking the emulation", 1s * done_);
        if (auto why = lab::unverifiable(t.lab); !why.empty())
            rec.check.note = why;  // apply_trial() has read the qdiscs back
        else
            rec.check = check_emulation(t, lab_where, tick_);
        if (checks_emulation(t)) done_ += kCheckSeconds;  // planned_seconds() counts it: so must the ETA
        if (rec.check.checked && !rec.check.held)
            progress_.line(fmt::format("{}: emulation did not hold: {}", label, rec.check.note));
        store_.put_trial(data_.run.id, rec);
        const auto sites = testbed.qdisc_sites(t);
        for (const auto& group : probes::probe_groups(t.probes)) {
            std::vector<Member> members;
            for (const auto* written : group.members) {
                auto [spec, where] = in_lab(*written, testbed.endpoints(probes::probe_family(*written)));
                probes::make_probe(spec);  // refuses a kind and tool it cannot measure, before any repeat
                members.push_back({std::move(spec), std::move(where), {}});
            }
            auto name = group.name.empty() ? members.front().spec.name : group.name;
            warm_up(label, name, members, testbed);
            for (auto& m : members) m.captures = start_captures(m.spec, testbed, work);
            const auto& rule = exp_.run;
            unsigned repeats = rule.first_repeats();
            bool decided = !rule.adaptive;
            for (unsigned r = 1; r <= repeats; ++r) {
                progress_.status(fmt::format("{}: {} repeat {}/{}{}", label, name, r, repeats, decided ? "" : "+"),
                                 1s * done_);
                measure(t, label, group.name, members, r, testbed, sites);
                if (between) between();
                done_ += longest(group);
                probes::sleep_until(probes::Clock::now() + exp_.run.cooldown, tick_);
                done_ += ns_to_s(exp_.run.cooldown.count());
                if (!decided && r == repeats) {
                    decided = true;
                    repeats = repeats_needed(t, group, members);
                    if (forecast_) {
                        planned_ += forecast_->decided(longest(group) + ns_to_s(rule.cooldown.count()), repeats);
                        progress_.plan(1s * planned_);
                    }
                }
            }
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
    }

    /// One probe of a trial as it measures: its spec and endpoints in the lab, its captures.
    struct Member {
        probes::ProbeSpec spec;
        probes::Endpoints where;
        std::vector<std::unique_ptr<diagnosis::Capture>> captures;
    };

    /// The warm-up of one probe, or of a group's members together: [run] warmup of traffic,
    /// discarded (none for the kinds that carry no state to warm).
    void warm_up(const std::string& label, const std::string& name, const std::vector<Member>& members,
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
        progress_.status(fmt::format("{}: {} warm-up", label, name), 1s * done_);
        try {
            if (jobs.size() == 1)
                jobs.front()(tick_);
            else
                probes::run_together(jobs, tick_);
        } catch (const probes::MeasurementError&) {
            // The repeats meet the same refusal and record it.
        }
        done_ += ns_to_s(exp_.run.warmup.count());
    }

    /// Repeat `r` of one probe, or of a group's members at the same time (`group` its name),
    /// each measurement committed as taken; a group's own record after its members'. The
    /// counters and queue statistics are the interval's, on each member's record.
    void measure(const lab::Trial& t, const std::string& label, const std::string& group, std::vector<Member>& members,
                 unsigned r, const lab::Testbed& testbed, const std::vector<netem::QdiscSite>& sites) {
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
        nlohmann::json delta = counters.delta();
        diagnosis::add_machine_deltas(delta, machines, testbed.machine_counters());
        const diagnosis::QdiscTally* tally = qdiscs ? &qdiscs->finish() : nullptr;
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
        record.kind = "group";
        auto g = record_of(record, probes::group_result(runs), t.index, r, started);
        g.counters = delta;
        if (tally) tally->add_series(g.series);
        commit(std::move(g));
    }

    /// [run] repeats = "auto": the repeats in all that Stein's rule asks of this probe or
    /// group, from its first ones: the most any settled metric asks (each member's main
    /// metric, a command probe's first own metric instead of its wall time, and every metric
    /// an [[assert]] names of a member or of the group).
    unsigned repeats_needed(const lab::Trial& t, const probes::ProbeGroup& group, const std::vector<Member>& members) {
        const auto& rule = exp_.run;
        std::vector<std::pair<std::string, std::string>> settle;  // (probe, metric)
        for (const auto& m : members)
            if (m.spec.kind == "command" && !m.spec.outputs.empty())  // the program's own number, not its start-up
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
            need = std::max(need,
                            probes::stats::stein_repeats(data_.first_repeats(t.index, probe, metric, rule.min_repeats),
                                                         rule.precision, rule.max_repeats));
        return static_cast<unsigned>(need);
    }

    /// The throughput probes of the group other than `self`, "a, b" ("" = none).
    static std::string load_beside(const std::vector<Member>& members, const probes::ProbeSpec& self) {
        std::string out;
        for (const auto& m : members)
            if (m.spec.kind == "throughput" && m.spec.name != self.name) out += (out.empty() ? "" : ", ") + m.spec.name;
        return out;
    }

    void commit(results::Measurement m) {
        store_.add_measurement(data_.run.id, m);
        data_.measurements.push_back(std::move(m));
    }

    /// One capture per lab host for a probe that asks for them (none otherwise).
    static std::vector<std::unique_ptr<diagnosis::Capture>> start_captures(const probes::ProbeSpec& spec,
                                                                           const lab::Testbed& testbed,
                                                                           const std::filesystem::path& work) {
        std::vector<std::unique_ptr<diagnosis::Capture>> out;
        auto bounds = diagnosis::capture_bounds(spec);
        if (!bounds) return out;
        std::filesystem::create_directories(work);
        for (const auto& p : testbed.capture_points())
            out.push_back(std::make_unique<diagnosis::Capture>(
                p.host, p.netns, p.dev, p.filter, work / fmt::format("capture-{}-{}.pcap", spec.name, p.host),
                *bounds));
        return out;
    }

    std::string trial_label(const lab::Trial& t) const {
        return fmt::format("[{}/{}] {}{}{}", t.index, exp_.trials.size(), t.variant, t.sweep.empty() ? "" : " ",
                           point_text(t));
    }

private:
    const lab::Experiment& exp_;
    results::Store& store_;
    Progress& progress_;
    const probes::Tick& tick_;
    results::RunData& data_;
    double& done_;
    double& planned_;
    RepeatForecast* forecast_;  // nullptr: fixed repeats
};

/// StageDir: a private folder under /tmp where services work when the results folder is on
/// a network filesystem. Creates: the folder (sys::make_service_dir). Undoes: removes it and
/// what is left in it.
struct StageDir {
    std::filesystem::path path = sys::make_service_dir("wanlab-trials", "the services");
    StageDir() = default;
    ~StageDir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
    StageDir(const StageDir&) = delete;
    StageDir& operator=(const StageDir&) = delete;
};

/// A staged trial folder to where the results keep it (nothing when they are the same).
void move_folder(const std::filesystem::path& from, const std::filesystem::path& to) {
    if (from == to || !std::filesystem::exists(from)) return;
    std::error_code ec;
    std::filesystem::create_directories(to, ec);
    std::filesystem::copy(
        from, to, std::filesystem::copy_options::recursive | std::filesystem::copy_options::overwrite_existing, ec);
    if (ec) throw Error(fmt::format("copying the trial folder {} to {}: {}", from.string(), to.string(), ec.message()));
    std::filesystem::remove_all(from, ec);
}

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
    for (const auto& g : probes::probe_groups(t.probes)) {  // a group's members at the same time
        bool warm = std::any_of(g.members.begin(), g.members.end(), [](const auto* p) { return warms_up(*p); });
        s += (warm ? ns_to_s(run.warmup.count()) : 0) +
             run.first_repeats() * (longest(g) + ns_to_s(run.cooldown.count()));
    }
    return s;
}

double repeat_seconds(const lab::Trial& t, const lab::RunSpec& run) {
    double s = 0;
    for (const auto& g : probes::probe_groups(t.probes)) s += longest(g) + ns_to_s(run.cooldown.count());
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
    auto loss = [](const netem::Loss& l) {
        if (l.model == netem::Loss::Model::none) return 0.0;
        return l.model == netem::Loss::Model::random ? l.probability : results::kNaN;
    };
    r.link_loss = loss(t.link.up.netem.loss);
    r.link_loss_down = loss(t.link.down.netem.loss);
    for (const auto& s : t.sysctl.global) r.sysctls[s.key] = s.value;
    for (const auto& [host, settings] : t.sysctl.per_host)
        for (const auto& s : settings) r.sysctls[host + ":" + s.key] = s.value;
    return r;
}

/// The sysctls an environment records: the usual buffer and cc keys and every key the
/// experiment sets.
std::vector<std::string> environment_keys(const lab::Experiment& exp) {
    std::set<std::string> keys(std::begin(kUsualKeys), std::end(kUsualKeys));
    for (const auto& t : exp.trials) {
        for (const auto& s : t.sysctl.global) keys.insert(s.key);
        for (const auto& [host, settings] : t.sysctl.per_host)
            for (const auto& s : settings) keys.insert(s.key);
    }
    return {keys.begin(), keys.end()};
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
    sysctl::RealProcSys proc;
    for (const auto& k : environment_keys(exp))
        if (auto v = proc.read("", k)) env.sysctls_before[k] = *v;
    return env;
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
        current->status = data.run.status == results::RunStatus::interrupted ? results::TrialStatus::interrupted : results::TrialStatus::failed;
        current->error = data.run.error;
        store.put_trial(data.run.id, *current);
    }
    data.run.finished = utc_now();
    end_session(data.run);
    store.finish_run(data.run);
    return exit_code;
}

Outcome run_experiment(const lab::Experiment& exp, const std::string& text, const RunnerOptions& options,
                       results::Store& store, Progress& progress, const probes::Tick& tick) {
    Outcome out;
    auto& data = out.data;
    const auto now = environment(exp, options.where);
    double planned = 0, repeating = 0;
    if (options.resume) {  // the same run, its finished trials kept (run/resume.h checked the plan)
        const auto& before = *options.resume;
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
            planned += planned_seconds(t, exp.run);
            repeating += repeat_seconds(t, exp.run);
            data.trials.push_back(trial_record(t));
        }
        for (const auto& m : before.measurements) {
            const auto* t = data.trial(m.trial);
            if (t && t->status == results::TrialStatus::done) data.measurements.push_back(m);
        }
    } else {
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
        for (const auto& t : exp.trials) {
            planned += planned_seconds(t, exp.run);
            repeating += repeat_seconds(t, exp.run);
            data.trials.push_back(trial_record(t));
        }
    }
    results::Session this_session;
    this_session.hostname = now.hostname;
    this_session.kernel = now.kernel;
    this_session.where = now.where;
    this_session.note = options.resume_note;
    data.run.sessions.push_back(this_session);
    const std::size_t session_number = data.run.sessions.size();
    const std::size_t left = static_cast<std::size_t>(
        std::count_if(data.trials.begin(), data.trials.end(), [](const auto& t) { return t.status != results::TrialStatus::done; }));
    progress.plan(1s * planned);

    sysctl::RealProcSys proc;
    lab::SessionOptions so;
    so.run = data.run.id;
    so.force = options.force;
    so.restore_stale = options.restore_stale;
    so.resume = options.resume != nullptr;
    so.dir = options.journal_dir;
    so.log = [&progress](const std::string& s) { progress.line(s); };
    so.progress = [&tick, &options](const std::string& stage) {
        if (options.on_stage) options.on_stage(stage);
        if (tick) tick();
    };
    std::unique_ptr<lab::Session> session;  // throws before anything is recorded
    if (exp.trials.front().lab.mode == lab::LabSpec::Mode::hosts) {
        remote::HostsOptions ho;
        ho.run = data.run.id;
        ho.restore_stale = options.restore_stale;
        ho.resume = options.resume != nullptr;
        // Each machine's watchdog gives it back well after the run should have ended.
        ho.deadline_s = static_cast<unsigned>(std::max(3600.0, 3 * planned + 600));
        ho.progress = so.progress;
        ho.log = so.log;
        auto hosts = std::make_unique<remote::HostsSession>(exp.trials, ho);
        hosts->machines(environment_keys(exp)).get_to(data.run.env.machines);
        session = std::move(hosts);
    } else {
        session = std::make_unique<lab::LabSession>(exp.trials, so, proc);
    }

    data.run.sessions.back().started = utc_now();
    if (!options.resume) data.run.started = data.run.sessions.back().started;
    double done = 0;
    out.exit_code = recorded_run(
        store, data,
        [&](results::Trial*& current) {
            if (options.resume)
                progress.line(
                    fmt::format("run {} resumed (session {}): {} of {} trials left, about {} of measuring; "
                                "results in {}",
                                data.run.id, session_number, left, exp.trials.size(), Progress::clock(planned),
                                store.path().string()));
            else
                progress.line(fmt::format("run {}: {} trials, about {} of measuring; results in {}", data.run.id,
                                          exp.trials.size(), Progress::clock(planned), store.path().string()));
            std::optional<RepeatForecast> forecast;
            if (exp.run.adaptive) forecast.emplace(exp.run.min_repeats, repeating);
            TrialRunner runner(exp, store, progress, tick, data, done, planned, forecast ? &*forecast : nullptr);
            auto files = options.files_dir.empty() ? store.path().parent_path() : options.files_dir;
            std::optional<StageDir> stage;
            // Services and captures write files as they run: over 9p both are slowed down.
            auto writes_files = [](const lab::Trial& t) {
                return !t.services.empty() || std::any_of(t.probes.begin(), t.probes.end(), [](const auto& p) {
                    return diagnosis::capture_bounds(p).has_value();
                });
            };
            if (std::any_of(exp.trials.begin(), exp.trials.end(), writes_files) && on_network_fs(files))
                stage.emplace();
            std::vector<std::string> failed;
            for (std::size_t i = 0; i < exp.trials.size(); ++i) {
                const auto& t = exp.trials[i];
                if (data.trials[i].status == results::TrialStatus::done) continue;  // measured by an earlier session
                current = &data.trials[i];
                current->session = session_number;
                session->apply_trial(t);
                auto keep = trial_dir(files, data.run.id, t);
                auto work = stage ? trial_dir(stage->path, data.run.id, t) : keep;
                try {
                    if (!t.services.empty()) progress.status(runner.trial_label(t) + ": starting services", 1s * done);
                    session->start_services(t, work, tick);
                    runner.run(
                        t, *current, session->testbed(), [&session] { session->check_services(); }, work,
                        keep.lexically_relative(files));
                    session->check_services();
                    session->stop_services();
                    move_folder(work, keep);
                    current->status = results::TrialStatus::done;
                } catch (const services::ServiceFailure& e) {
                    // The trial's own program failed, not the lab: that trial fails, the run goes on.
                    session->stop_services();
                    move_folder(work, keep);
                    current->status = results::TrialStatus::failed;
                    current->error = replace_all(e.what(), work.string(), keep.string());
                    failed.push_back(fmt::format("trial {} ({}): {}", t.index, t.id, current->error));
                    progress.line(fmt::format("{}: failed: {}", runner.trial_label(t), current->error));
                }
                store.put_trial(data.run.id, *current);
                current = nullptr;
                if (options.on_trial) options.on_trial(data);
            }
            if (!failed.empty())
                throw Error(fmt::format("{} of {} trials failed; the first: {}", failed.size(), exp.trials.size(),
                                        failed.front()));
        },
        [&session] { session.reset(); }, options.resume != nullptr);
    return out;
}

}  // namespace wanlab::run
