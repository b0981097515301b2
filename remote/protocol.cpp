#include "remote/protocol.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/version.h"
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

json hello(const std::string& hostname) {
    return {{"agent", "wanlab"}, {"version", kVersion}, {"protocol", kProtocol}, {"host", hostname}};
}

std::string hello_problem(const json& h, const std::string& host, const std::string& wanlab) {
    auto version = h.value("version", std::string("?"));
    if (version != kVersion || h.value("protocol", 0) != kProtocol)
        return fmt::format(
            "{}: `{}` there is wanlab {} (agent protocol {}); this is wanlab {} (protocol {}): install the same "
            "version on both machines (on a Debian machine: the same .deb, or build this checkout there)",
            host, wanlab, version, h.value("protocol", 0), kVersion, kProtocol);
    return "";
}

json service_json(const services::ServiceSpec& s) {
    json files = json::array();
    for (const auto& f : s.files) files.push_back({{"name", f.name}, {"source", f.source}, {"text", f.text}});
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
            s.files.push_back({name, f.at("source").get<std::string>(), f.at("text").get<std::string>(), {}});
        }
        j.at("vars").get_to(s.vars);
        if (s.command.empty()) throw Error("a service without a command");
        return s;
    } catch (const json::exception& e) {
        throw Error(fmt::format("a service as the controller sent it: {}", e.what()));
    }
}

}  // namespace wanlab::remote
