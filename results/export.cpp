#include "results/store.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string_view>

#include <fmt/format.h>

#include "core/error.h"
#include "probes/probe.h"
#include "probes/probe_spec.h"
#include "results/records.h"

namespace wanlab::results {
namespace {

using nlohmann::json;

using record::number;
using record::number_from;

json numbers(const std::vector<double>& values) {
    json out = json::array();
    for (double v : values) out.push_back(number(v));
    return out;
}

std::vector<double> numbers_from(const json& j) {
    std::vector<double> out;
    for (const auto& v : j) out.push_back(number_from(v));
    return out;
}

json measurement_json(const Measurement& m) {
    json metrics = json::object();
    for (const auto& [name, value] : m.metrics) metrics[name] = number(value);
    json samples = json::object();
    for (const auto& [name, values] : m.samples) samples[name] = numbers(values);
    json series = json::object();
    for (const auto& [name, s] : m.series) series[name] = {{"t", numbers(s.t)}, {"value", numbers(s.value)}};
    // Its columns, then its child tables.
    json j = record::to_json(record::measurements(), m);
    j["metrics"] = metrics;
    j["samples"] = samples;
    j["series"] = series;
    return j;
}

Measurement measurement_from(const json& j) {
    Measurement m;
    record::from_json(record::measurements(), j, m);
    for (const auto& [name, value] : j.at("metrics").items()) m.metrics[name] = number_from(value);
    for (const auto& [name, values] : j.at("samples").items()) m.samples[name] = numbers_from(values);
    if (auto it = j.find("series"); it != j.end())  // older exports have none
        for (const auto& [name, s] : it->items()) {
            auto& out = m.series[name];
            out.t = numbers_from(s.at("t"));
            out.value = numbers_from(s.at("value"));
            if (out.t.size() != out.value.size())
                throw json::other_error::create(501, "series " + name + ": t and value differ in length", &s);
        }
    return m;
}

void append_row(std::string& out, const std::vector<std::string>& fields) {
    for (std::size_t i = 0; i < fields.size(); ++i) {
        if (i > 0) out += ',';
        out += csv_field(fields[i]);
    }
    out += '\n';
}

/// Every swept path, the first trial's in its order, then any other trial's as first seen.
std::vector<std::string> sweep_columns(const RunData& data) {
    std::vector<std::string> paths;
    for (const auto& t : data.trials)
        for (const auto& entry : t.sweep)
            if (std::find(paths.begin(), paths.end(), entry.first) == paths.end()) paths.push_back(entry.first);
    return paths;
}

std::string sweep_value(const Trial* t, const std::string& path) {
    if (t == nullptr) return "";
    for (const auto& entry : t->sweep)
        if (entry.first == path) return entry.second;
    return "";
}

// The kind's table, or for a command probe's own metric the unit its note declares.
std::string unit_of(const Measurement& m, const std::string& metric) {
    const probes::ProbeKind* k = probes::find_kind(m.kind);
    if (const probes::MetricSpec* spec = k != nullptr ? probes::describe_metric(*k, metric) : nullptr)
        return probes::unit_name(spec->unit);
    for (const auto& note : m.notes)
        if (auto noted = probes::parse_output_note(note); noted && noted->name == metric)
            return probes::unit_name(noted->unit);
    return "";
}

/// The shortest text that reads back as the same double (fmt's default); NaN empty.
std::string csv_value(double v) { return std::isnan(v) ? std::string() : fmt::format("{}", v); }

std::vector<std::string> csv_header(const std::vector<std::string>& sweep) {
    std::vector<std::string> h = {"run", "trial", "trial_id", "variant"};
    h.insert(h.end(), sweep.begin(), sweep.end());
    for (const char* name : {"probe", "kind", "tool", "repeat", "metric", "t", "value", "unit"}) h.emplace_back(name);
    return h;
}

void append_measurement(std::string& out, const RunData& data, const std::vector<std::string>& sweep,
                        const Measurement& m) {
    const Trial* t = data.trial(m.trial);
    auto row = [&](const std::string& name, const std::string& at, double value, const std::string& unit) {
        std::vector<std::string> fields = {data.run.id, std::to_string(m.trial), t ? t->id : "", t ? t->variant : ""};
        for (const auto& path : sweep) fields.push_back(sweep_value(t, path));
        fields.insert(fields.end(),
                      {m.probe, m.kind, m.tool, std::to_string(m.repeat), name, at, csv_value(value), unit});
        append_row(out, fields);
    };
    // A summary metric has no time; a series' points follow it, one row each.
    for (const auto& [metric, value] : m.metrics) row(metric, "", value, unit_of(m, metric));
    for (const auto& [name, s] : m.series)
        for (std::size_t i = 0; i < s.size(); ++i)
            row(name, csv_value(s.t[i]), s.value[i], probes::unit_name(probes::series_unit(name)));
}

}  // namespace

std::string csv_field(std::string_view s) {
    std::string out(s);
    // A spreadsheet runs a cell that starts with = + - @ (or a tab or carriage return before
    // one) as a formula: such a text starts with ' instead (OWASP's advice). A number is left
    // as it is: "-0.5" is data.
    if (!s.empty() && std::string_view("=+-@\t\r").find(s.front()) != std::string_view::npos) {
        char* end = nullptr;
        std::string text(s);
        std::strtod(text.c_str(), &end);
        bool number = end == text.c_str() + text.size() && s.front() != '=' && s.front() != '@';
        if (!number) out.insert(0, "'");
    }
    // RFC 4180: a field holding a comma, a quote or a line break is quoted, its quotes doubled.
    if (out.find_first_of(",\"\r\n") == std::string::npos) return out;
    std::string quoted = "\"";
    for (char c : out) {
        if (c == '"') quoted += '"';
        quoted += c;
    }
    return quoted + '"';
}

void to_json(json& j, const Environment& env) {
    j = {{"hostname", env.hostname}, {"kernel", env.kernel},
         {"machine", env.machine},   {"wanlab_version", env.wanlab_version},
         {"where", env.where},       {"sysctls_before", env.sysctls_before}};
    if (!env.machines.empty()) j["machines"] = env.machines;
    if (env.host) j["host"] = *env.host;
}

void from_json(const json& j, Environment& env) {
    j.at("hostname").get_to(env.hostname);
    j.at("kernel").get_to(env.kernel);
    j.at("machine").get_to(env.machine);
    j.at("wanlab_version").get_to(env.wanlab_version);
    j.at("where").get_to(env.where);
    j.at("sysctls_before").get_to(env.sysctls_before);
    if (auto it = j.find("machines"); it != j.end()) it->get_to(env.machines);  // since hosts mode recorded them
    if (auto it = j.find("host"); it != j.end()) env.host = it->get<MachineEnvironment>();  // since issue 39
}

void to_json(json& j, const RepeatRule& r) {
    if (!r.adaptive) {
        j = json::object();  // a fixed count: the trials' measurements say how many
        return;
    }
    j = {{"rule", "auto"}, {"first", r.first}, {"max", r.max}, {"precision", r.precision}};
}

void from_json(const json& j, RepeatRule& r) {
    r = RepeatRule{};
    if (!j.contains("rule")) return;
    r.adaptive = j.at("rule").get<std::string>() == "auto";
    j.at("first").get_to(r.first);
    j.at("max").get_to(r.max);
    j.at("precision").get_to(r.precision);
}

void to_json(json& j, const EmulationCheck& c) {
    j = {{"checked", c.checked},
         {"held", c.held},
         {"rtt_configured", number(c.rtt_configured)},
         {"rtt_measured", number(c.rtt_measured)},
         {"rate_configured", number(c.rate_configured)},
         {"rate_measured", number(c.rate_measured)},
         {"note", c.note}};
}

void from_json(const json& j, EmulationCheck& c) {
    j.at("checked").get_to(c.checked);
    j.at("held").get_to(c.held);
    c.rtt_configured = number_from(j.at("rtt_configured"));
    c.rtt_measured = number_from(j.at("rtt_measured"));
    c.rate_configured = number_from(j.at("rate_configured"));
    c.rate_measured = number_from(j.at("rate_measured"));
    j.at("note").get_to(c.note);
}

json to_json(const RunData& data) {
    json trials = json::array();
    for (const auto& t : data.trials) trials.push_back(record::to_json(record::trials(), t));
    json measurements = json::array();
    for (const auto& m : data.measurements) measurements.push_back(measurement_json(m));
    return {{"run", record::to_json(record::runs(), data.run)}, {"trials", trials}, {"measurements", measurements}};
}

// A malformed document throws wanlab::Error with nlohmann's message (which names the key).
RunData from_json(const json& j) {
    try {
        RunData data;
        record::from_json(record::runs(), j.at("run"), data.run);
        for (const auto& t : j.at("trials")) record::from_json(record::trials(), t, data.trials.emplace_back());
        for (const auto& m : j.at("measurements")) data.measurements.push_back(measurement_from(m));
        return data;
    } catch (const json::exception& e) {
        throw Error(fmt::format("reading a run's results from JSON: {}", e.what()));
    }
}

std::string to_csv(const RunData& data) {
    const std::vector<std::string> sweep = sweep_columns(data);
    std::string out;
    append_row(out, csv_header(sweep));
    for (const auto& m : data.measurements) append_measurement(out, data, sweep, m);
    return out;
}

}  // namespace wanlab::results
