#include "remote/protocol.h"

#include <cmath>

#include <fmt/format.h>

#include "core/config.h"
#include "core/error.h"
#include "core/json.h"
#include "core/text.h"
#include "core/version.h"
#include "netem/attributes.h"
#include "probes/probe_spec.h"
#include "remote/agent.h"

namespace wanlab::remote {
namespace {

using nlohmann::json;
using services::ReadyCheck;

const char* kind_name(ReadyCheck::Kind k) {
    switch (k) {
        case ReadyCheck::Kind::port: return "port";
        case ReadyCheck::Kind::command: return "command";
        case ReadyCheck::Kind::delay: return "delay";
        case ReadyCheck::Kind::none: break;
    }
    return "none";
}

ReadyCheck::Kind kind_of(const std::string& s) {
    if (s == "port") return ReadyCheck::Kind::port;
    if (s == "command") return ReadyCheck::Kind::command;
    if (s == "delay") return ReadyCheck::Kind::delay;
    if (s == "none") return ReadyCheck::Kind::none;
    throw InputError(fmt::format("a service's ready check \"{}\" is none of port, command, delay, none",
                                 text::terminal_safe(s.substr(0, 32))));
}

}  // namespace

json direction_json(const netem::Direction& d) { return netem::to_agent_json(d); }

netem::Direction direction_of(const json& j) {
    try {
        return netem::from_agent_json(j);
    } catch (const json::exception& e) {
        throw Error(fmt::format("link conditions as the controller sent them: {}", e.what()));
    }
}

json flow_json(const netem::Flow& f) {
    return {{"local", f.local}, {"local_port", f.local_port}, {"peer", f.peer}, {"peer_port", f.peer_port}};
}

netem::Flow flow_of(const json& j) {
    constexpr std::string_view where = "a connection as the controller sent it";
    netem::Flow f;
    f.local = json_input::field<std::string>(j, "local", where);
    f.local_port = json_input::field<std::uint16_t>(j, "local_port", where);
    f.peer = json_input::field<std::string>(j, "peer", where);
    f.peer_port = json_input::field<std::uint16_t>(j, "peer_port", where);
    return f;
}

json hello(const std::string& hostname, const std::string& kernel, const std::string& machine) {
    return {{"agent", "wanlab"}, {"version", kVersion}, {"protocol", kProtocol},
            {"host", hostname},  {"kernel", kernel},    {"machine", machine}};
}

std::string hello_problem(const json& h, const std::string& host, const std::string& wanlab) {
    // Whatever the other end sent, of any type: shown escaped and short, never trusted.
    auto shown = [&h](const char* key) {
        auto it = h.find(key);
        if (it == h.end()) return std::string("?");
        return text::terminal_safe((it->is_string() ? it->get<std::string>() : json_input::dump(*it)).substr(0, 64));
    };
    auto protocol = h.find("protocol");
    bool same_protocol = protocol != h.end() && protocol->is_number_integer() && *protocol == kProtocol;
    auto version = h.find("version");
    bool same_version = version != h.end() && version->is_string() && *version == kVersion;
    if (!same_version || !same_protocol)
        return fmt::format(
            "{}: `{}` there is wanlab {} (agent protocol {}); this is wanlab {} (protocol {}): install the same "
            "version on both machines (on a Debian machine: the same .deb, or build this checkout there)",
            host, wanlab, shown("version"), shown("protocol"), kVersion, kProtocol);
    return "";
}

json service_json(const services::ServiceSpec& s) {
    json files = json::array();
    for (const auto& f : s.files)
        files.push_back({{"name", f.name}, {"source", f.source}, {"text", f.text}, {"mode", f.mode}});
    return {{"name", s.name},
            {"host", s.host},
            {"command", s.command},
            {"ready",
             {{"kind", kind_name(s.ready.kind)},
              {"port", s.ready.port},
              {"address", s.ready.address},
              {"command", s.ready.command},
              {"delay_ns", s.ready.delay.count()},
              {"timeout_ns", s.ready.timeout.count()}}},
            {"stop_timeout_ns", s.stop_timeout.count()},
            {"files", files},
            {"vars", s.vars}};
}

services::ServiceSpec service_of(const json& j) {
    using json_input::field;
    using json_input::field_or;
    services::ServiceSpec s;
    s.name = field<std::string>(j, "name", "a service as the controller sent it");
    // It names the service's log files in its folder: never a path out of it.
    if (!text::valid_name(s.name))
        throw InputError(
            fmt::format("a service name as the controller sent it (\"{}\") must be 1-64 letters, "
                        "digits, `-` or `_`",
                        text::terminal_safe(s.name.substr(0, 64))));
    const auto where = fmt::format("service `{}` as the controller sent it", s.name);
    s.host = field<std::string>(j, "host", where);
    s.command = field<std::vector<std::string>>(j, "command", where);
    const auto r = field<json>(j, "ready", where);
    const auto ready = where + ": ready";
    s.ready.kind = kind_of(field<std::string>(r, "kind", ready));
    s.ready.port = field<std::uint16_t>(r, "port", ready);
    s.ready.address = field<std::string>(r, "address", ready);
    s.ready.command = field<std::vector<std::string>>(r, "command", ready);
    // Durations as the file bounds them: at most a day, never negative.
    auto duration = [](const json& o, const char* name, const std::string& at) {
        auto ns = field<std::int64_t>(o, name, at);
        if (ns < 0 || ns > config::kMaxDuration.count())
            throw InputError(fmt::format("{}: `{}` must be 0 to {} ns", at, name, config::kMaxDuration.count()));
        return std::chrono::nanoseconds(ns);
    };
    s.ready.delay = duration(r, "delay_ns", ready);
    s.ready.timeout = duration(r, "timeout_ns", ready);
    s.stop_timeout = duration(j, "stop_timeout_ns", where);
    for (const auto& f : field<json::array_t>(j, "files", where)) {
        auto name = field<std::string>(f, "name", where + ": a template");
        // A file name in the trial's folder, as the loader allows: never a path out of it.
        bool plain = !name.empty() && name != "." && name != ".." &&
                     name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") ==
                         std::string::npos;
        if (!plain)
            throw InputError(fmt::format("{}: template file name \"{}\" is not a plain name", where,
                                         text::terminal_safe(name.substr(0, 64))));
        auto at = fmt::format("{}: template {}", where, name);
        s.files.push_back({name,
                           field<std::string>(f, "source", at),
                           field<std::string>(f, "text", at),
                           {},
                           field_or(f, "mode", 0644u, at) & 0777u});
    }
    s.vars = field<std::map<std::string, std::string>>(j, "vars", where);
    if (s.command.empty()) throw InputError(where + ": `command` is empty");
    return s;
}

json probe_json(const probes::ProbeSpec& p) {
    json options = json::object();
    for (const auto& [key, v] : p.options) {
        const auto& k = key;  // clang 14 cannot capture a structured binding
        std::visit([&options, &k](const auto& x) { options[k] = x; }, v);
    }
    return {{"name", p.name}, {"kind", p.kind}, {"options", options}};
}

probes::ProbeSpec probe_of(const json& j) {
    constexpr std::string_view where = "a probe as the controller sent it";
    probes::ProbeSpec p;
    p.name = json_input::field<std::string>(j, "name", where);
    p.kind = json_input::field<std::string>(j, "kind", where);
    for (const auto& [k, v] : json_input::field<json::object_t>(j, "options", where)) {
        if (v.is_boolean())
            p.options[k] = v.get<bool>();
        else if (v.is_string())
            p.options[k] = v.get<std::string>();
        else if (v.is_number_integer() && (!v.is_number_unsigned() || v.get<std::uint64_t>() <= INT64_MAX))
            p.options[k] = v.get<std::int64_t>();
        else if (v.is_number_float())
            p.options[k] = v.get<double>();
        else
            throw InputError(fmt::format("{}: option `{}` is neither a number, a boolean nor a string", where,
                                         text::terminal_safe(k.substr(0, 64))));
    }
    // As strictly as the experiment file: the kind's own options, each in its range.
    if (auto why = probes::spec_problem(p); !why.empty()) throw InputError(fmt::format("{}: {}", where, why));
    return p;
}

namespace {

json number(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }
double number_of(const json& j) { return j.is_null() ? std::nan("") : j.get<double>(); }

json numbers(const std::map<std::string, double>& m) {
    json out = json::object();
    for (const auto& [k, v] : m) out[k] = number(v);
    return out;
}
std::map<std::string, double> numbers_of(const json& j) {
    std::map<std::string, double> out;
    for (const auto& [k, v] : j.items()) out[k] = number_of(v);
    return out;
}

json connection_json(const probes::ConnectionStats& c) {
    return {{"direction", c.direction}, {"congestion_control", c.congestion_control}, {"values", numbers(c.values)}};
}
probes::ConnectionStats connection_of(const json& c) {
    return {c.at("direction").get<std::string>(), c.at("congestion_control").get<std::string>(),
            numbers_of(c.at("values"))};
}

json series_json(const probes::SeriesMap& m) {
    json out = json::object();
    for (const auto& [name, s] : m) {
        json v = json::array();
        for (double x : s.value) v.push_back(number(x));
        out[name] = {{"t", s.t}, {"value", v}};
    }
    return out;
}
probes::SeriesMap series_of(const json& j) {
    probes::SeriesMap out;
    for (const auto& [name, s] : j.items()) {
        probes::Series one;
        one.t = s.at("t").get<std::vector<double>>();
        for (const auto& v : s.at("value")) one.value.push_back(number_of(v));
        if (one.t.size() != one.value.size()) throw Error(fmt::format("series {}: times and values differ", name));
        out[name] = std::move(one);
    }
    return out;
}

}  // namespace

json far_report_json(const probes::FarReport& r) {
    json connections = json::array();
    for (const auto& [port, c] : r.connections) {
        connections.push_back(connection_json(c));
        connections.back()["port"] = port;
    }
    return {{"connections", connections},
            {"series", series_json(r.series)},
            {"sysctls", r.sysctls},
            {"requests", r.requests}};
}

probes::FarReport far_report_of(const json& j) {
    try {
        probes::FarReport r;
        for (const auto& c : j.at("connections")) r.connections[c.at("port").get<std::uint16_t>()] = connection_of(c);
        r.series = series_of(j.at("series"));
        r.sysctls = j.at("sysctls").get<std::map<std::string, std::string>>();
        r.requests = j.at("requests").get<std::uint64_t>();
        return r;
    } catch (const json::exception& e) {
        throw Error(fmt::format("a malformed probe server report: {}", e.what()));
    }
}

json probe_result_json(const probes::ProbeResult& r, std::size_t max_samples) {
    json samples = json::object();
    auto notes = r.notes;
    for (const auto& [name, values] : r.samples) {
        auto& out = samples[name] = json::array();
        for (std::size_t i = 0; i < values.size() && i < max_samples; ++i) out.push_back(number(values[i]));
        if (values.size() > max_samples)
            notes.push_back(fmt::format("samples.{} holds the first {} of {} (the client machine's agent sent no more)",
                                        name, max_samples, values.size()));
    }
    json connections = json::array();
    for (const auto& c : r.connections) connections.push_back(connection_json(c));
    return {{"kind", r.kind},
            {"tool", r.tool},
            {"metrics", numbers(r.metrics)},
            {"samples", samples},
            {"series", series_json(r.series)},
            {"connections", connections},
            {"notes", notes}};
}

probes::ProbeResult probe_result_of(const json& j) {
    try {
        probes::ProbeResult r;
        r.kind = j.at("kind").get<std::string>();
        r.tool = j.at("tool").get<std::string>();
        r.metrics = numbers_of(j.at("metrics"));
        for (const auto& [name, values] : j.at("samples").items())
            for (const auto& v : values) r.samples[name].push_back(number_of(v));
        r.series = series_of(j.at("series"));
        for (const auto& c : j.at("connections")) r.connections.push_back(connection_of(c));
        r.notes = j.at("notes").get<std::vector<std::string>>();
        return r;
    } catch (const json::exception& e) {
        throw Error(fmt::format("a malformed probe result: {}", e.what()));
    }
}

}  // namespace wanlab::remote
