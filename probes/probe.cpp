#include "probes/probe.h"

#include <fmt/format.h>

#include "core/error.h"
#include "probes/external.h"

namespace wanlab::probes {
namespace {

using RunFn = ProbeResult (*)(const ProbeSpec&, const Endpoints&, const Tick&);

/// A probe that is one function of (spec, endpoints).
class FunctionProbe : public Probe {
public:
    FunctionProbe(ProbeSpec spec, RunFn fn) : spec_(std::move(spec)), fn_(fn) {}
    ProbeResult run(const Endpoints& where, const Tick& tick) override { return fn_(spec_, where, tick); }

private:
    ProbeSpec spec_;
    RunFn fn_;
};

struct Implementation {
    const char* kind;
    const char* tool;
    RunFn run;
};

constexpr Implementation kImplementations[] = {
    {"throughput", "builtin", &run_throughput},
    {"throughput", "iperf3", &run_iperf3},
    {"rtt", "builtin", &run_rtt},
    {"rtt", "ping", &run_ping},
    {"rtt", "hping3", &run_hping3},
    {"rr", "builtin", &run_rr},
    {"http", "builtin", &run_http},
    {"http", "wrk", &run_wrk},
};

const OptionValue& option(const ProbeSpec& spec, const std::string& name) {
    auto it = spec.options.find(name);
    if (it == spec.options.end()) throw Error(fmt::format("probe {} has no option `{}`", spec.name, name));
    return it->second;
}

}  // namespace

const MetricSpec* describe_metric(const ProbeKind& kind, std::string_view metric) {
    return find_metric(kind, metric);
}

std::unique_ptr<Probe> make_probe(const ProbeSpec& spec) {
    auto t = spec.options.find("tool");
    std::string tool = t != spec.options.end() ? std::get<std::string>(t->second) : "builtin";
    std::string available;
    for (const auto& impl : kImplementations) {
        if (spec.kind != impl.kind) continue;
        if (tool == impl.tool) return std::make_unique<FunctionProbe>(spec, impl.run);
        available += fmt::format("{}{}", available.empty() ? "" : ", ", impl.tool);
    }
    if (available.empty()) throw InputError(fmt::format("probe kind `{}` cannot be measured yet", spec.kind));
    throw InputError(fmt::format("probe kind `{}` with tool `{}` cannot be measured yet (available: {})", spec.kind,
                                 tool, available));
}

std::int64_t option_int(const ProbeSpec& spec, const std::string& name) {
    const auto& v = option(spec, name);
    if (auto i = std::get_if<std::int64_t>(&v)) return *i;
    throw Error(fmt::format("probe option `{}` is not a number", name));
}

bool option_bool(const ProbeSpec& spec, const std::string& name) {
    const auto& v = option(spec, name);
    if (auto b = std::get_if<bool>(&v)) return *b;
    throw Error(fmt::format("probe option `{}` is not a boolean", name));
}

std::string option_string(const ProbeSpec& spec, const std::string& name) {
    const auto& v = option(spec, name);
    if (auto s = std::get_if<std::string>(&v)) return *s;
    throw Error(fmt::format("probe option `{}` is not a string", name));
}

}  // namespace wanlab::probes
