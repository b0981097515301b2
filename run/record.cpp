#include "run/record.h"

#include <sys/utsname.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json.h"
#include "core/sys.h"
#include "core/version.h"
#include "run/check.h"
#include "sysctl/proc_sys.h"

namespace wanlab::run {
namespace {

// The keys a report needs to explain buffer effects, recorded even when no trial sets them.
const char* const kUsualKeys[] = {
    "net.core.rmem_max",     "net.core.wmem_max", "net.core.rmem_default",           "net.core.wmem_default",
    "net.ipv4.tcp_rmem",     "net.ipv4.tcp_wmem", "net.ipv4.tcp_congestion_control", "net.ipv4.tcp_adv_win_scale",
    "net.core.default_qdisc"};

double recorded_loss(const netem::Loss& l) {
    if (l.model == netem::Loss::Model::none) return 0.0;
    return l.model == netem::Loss::Model::random ? l.probability : results::kNaN;
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

results::Trial trial_record(const experiment::Trial& t) {
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
    r.link_loss = recorded_loss(t.link.up.netem.loss);
    r.link_loss_down = recorded_loss(t.link.down.netem.loss);
    for (const auto& s : t.sysctl.global) r.sysctls[s.key] = s.value;
    for (const auto& [host, settings] : t.sysctl.per_host)
        for (const auto& s : settings) r.sysctls[host + ":" + s.key] = s.value;
    return r;
}

std::vector<std::string> environment_keys(const experiment::Experiment& exp) {
    std::set<std::string> keys(std::begin(kUsualKeys), std::end(kUsualKeys));
    for (const auto& t : exp.trials) {
        for (const auto& s : t.sysctl.global) keys.insert(s.key);
        for (const auto& [host, settings] : t.sysctl.per_host)
            for (const auto& s : settings) keys.insert(s.key);
    }
    return {keys.begin(), keys.end()};
}

results::MachineEnvironment this_machine_environment() {
    results::MachineEnvironment m;
    m.ssh = "local";
    utsname u{};
    if (::uname(&u) == 0) {
        m.hostname = u.nodename;
        m.kernel = u.release;
        m.machine = u.machine;
    }
    sysctl::RealProcSys proc;
    for (const char* k : kUsualKeys)
        if (auto v = proc.read("", k)) m.sysctls_before[k] = *v;
    return m;
}

results::MachineEnvironment read_host_environment(const std::string& path) {
    auto text = sys::read_file(path, sys::kMaxInputBytes, "--host-env", true);
    try {
        return json_input::parse_or_throw(text, "--host-env " + path).get<results::MachineEnvironment>();
    } catch (const nlohmann::json::exception& e) {
        throw Error(fmt::format("--host-env {}: not the machine wanlab describes there: {}", path, e.what()));
    }
}

results::Environment environment(const experiment::Experiment& exp, const std::string& where) {
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

std::string utc_now() {
    std::time_t now = std::time(nullptr);
    std::tm tm{};
    ::gmtime_r(&now, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

}  // namespace wanlab::run
