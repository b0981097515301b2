#include "remote/protocol.h"

#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "core/json.h"
#include "core/text.h"
#include "core/version.h"
#include "netem/attributes.h"
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
    return ReadyCheck::Kind::none;
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
    try {
        netem::Flow f;
        j.at("local").get_to(f.local);
        j.at("local_port").get_to(f.local_port);
        j.at("peer").get_to(f.peer);
        j.at("peer_port").get_to(f.peer_port);
        return f;
    } catch (const json::exception& e) {
        throw Error(fmt::format("a connection as the controller sent it: {}", e.what()));
    }
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
    try {
        services::ServiceSpec s;
        j.at("name").get_to(s.name);
        // It names the service's log files in its folder: never a path out of it.
        if (!text::valid_name(s.name))
            throw InputError(
                fmt::format("a service name as the controller sent it (\"{}\") must be 1-64 letters, "
                            "digits, `-` or `_`",
                            text::terminal_safe(s.name.substr(0, 64))));
        j.at("host").get_to(s.host);
        j.at("command").get_to(s.command);
        const auto& r = j.at("ready");
        s.ready.kind = kind_of(r.at("kind").get<std::string>());
        r.at("port").get_to(s.ready.port);
        r.at("address").get_to(s.ready.address);
        r.at("command").get_to(s.ready.command);
        s.ready.delay = std::chrono::nanoseconds(r.at("delay_ns").get<std::int64_t>());
        s.ready.timeout = std::chrono::nanoseconds(r.at("timeout_ns").get<std::int64_t>());
        s.stop_timeout = std::chrono::nanoseconds(j.at("stop_timeout_ns").get<std::int64_t>());
        for (const auto& f : j.at("files")) {
            auto name = f.at("name").get<std::string>();
            // A file name in the trial's folder, as the loader allows: never a path out of it.
            bool plain = !name.empty() && name != "." && name != ".." &&
                         name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") ==
                             std::string::npos;
            if (!plain)
                throw Error(fmt::format("service `{}`: template file name \"{}\" is not a plain name", s.name, name));
            s.files.push_back({name,
                               f.at("source").get<std::string>(),
                               f.at("text").get<std::string>(),
                               {},
                               f.value("mode", 0644u) & 0777u});
        }
        j.at("vars").get_to(s.vars);
        if (s.command.empty()) throw Error("a service without a command");
        return s;
    } catch (const json::exception& e) {
        throw Error(fmt::format("a service as the controller sent it: {}", e.what()));
    }
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
    try {
        probes::ProbeSpec p;
        p.name = j.at("name").get<std::string>();
        p.kind = j.at("kind").get<std::string>();
        for (const auto& [k, v] : j.at("options").items()) {
            if (v.is_boolean())
                p.options[k] = v.get<bool>();
            else if (v.is_string())
                p.options[k] = v.get<std::string>();
            else if (v.is_number_integer())
                p.options[k] = v.get<std::int64_t>();
            else if (v.is_number_float())
                p.options[k] = v.get<double>();
            else
                throw Error(fmt::format("option `{}` is neither a number, a boolean nor a string", k));
        }
        return p;
    } catch (const json::exception& e) {
        throw Error(fmt::format("a malformed probe: {}", e.what()));
    }
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
