#include "experiment/tune.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/units.h"
#include "experiment/experiment.h"
#include "experiment/trials.h"

namespace wanlab::experiment {

using config::Node;
using config::Reader;

namespace {

bool prefix_of(const std::string& a, const std::string& b) {
    return a == b || (b.size() > a.size() && b.starts_with(a) && b[a.size()] == '.');
}

// A socket buffer's maximum or triple: what `buffer_budget` bounds.
bool socket_buffer_key(const std::string& path) {
    auto last = path.substr(path.rfind('.') + 1);
    return last == "rmem_max" || last == "wmem_max" || last == "tcp_rmem" || last == "tcp_wmem" ||
           last == "rmem_default" || last == "wmem_default" || last == "udp_mem" || last == "tcp_mem";
}

// A value as an amount: a plain number, a size ("4MiB"), or a triple's largest ("4096 131072
// 6291456", as tcp_rmem is written). nullopt for a word.
std::optional<double> amount_of(const Node& leaf) {
    if (leaf.kind != Node::Kind::value) return std::nullopt;
    if (auto i = leaf.value->value_exact<std::int64_t>()) return static_cast<double>(*i);
    if (auto f = leaf.value->value_exact<double>()) return *f;
    auto s = leaf.value->value_exact<std::string>();
    if (!s) return std::nullopt;
    auto sizes = units::parse_sizes(*s);
    if (!sizes) return std::nullopt;
    return static_cast<double>(*std::max_element(sizes->begin(), sizes->end()));
}

// A leaf as TOML text: what `v = TEXT` reads back as the same value.
std::string toml_text(const Node& leaf) {
    const toml::node& v = *leaf.value;
    if (auto str = v.value_exact<std::string>()) return nlohmann::json(*str).dump();  // JSON's escapes are TOML's
    if (auto i = v.value_exact<std::int64_t>()) return std::to_string(*i);
    if (auto f = v.value_exact<double>())
        return fmt::format("{:.17g}", *f).find_first_of(".en") == std::string::npos ? fmt::format("{:.17g}.0", *f)
                                                                                    : fmt::format("{:.17g}", *f);
    if (auto b = v.value_exact<bool>()) return *b ? "true" : "false";
    if (const auto* arr = v.as_array()) {
        std::string out;
        for (std::size_t i = 0; i < arr->size(); ++i) out += (i ? ", " : "") + toml_text(config::element(leaf, i));
        return "[" + out + "]";
    }
    return "\"\"";
}

// `{ from = "256KiB", to = "64MiB", scale = "x2" }` (or `step = "1MiB"`): sizes or plain
// numbers from `from` up to `to`, each `scale` times the one before (or `step` more).
bool expand_range(const Node& range, TuneKey& key, Diagnostics& diag) {
    Reader r(range, fmt::format("[tune.space] \"{}\"", key.path), diag);
    const Node* from = r.raw("from");
    const Node* to = r.raw("to");
    auto scale = r.string("scale");
    const Node* step = r.raw("step");
    r.finish();
    if (!from || !to) {
        diag.error(range.value_at, fmt::format("the range of `{}` needs `from` and `to`", key.path),
                   "write { from = \"256KiB\", to = \"64MiB\", scale = \"x2\" }, or list the values");
        return false;
    }
    if (scale.has_value() == (step != nullptr)) {
        diag.error(range.value_at,
                   fmt::format("the range of `{}` needs `scale` (\"x2\": each value twice the one before) "
                               "or `step` (each value that much more), one of them",
                               key.path));
        return false;
    }
    auto a = amount_of(*from), b = amount_of(*to);
    const bool sized = from->value && from->value->is_string();
    auto triple = [](const Node& n) {
        auto s = n.kind == Node::Kind::value ? n.value->value_exact<std::string>() : std::nullopt;
        return s && s->find(' ') != std::string::npos;
    };
    if (!a || !b || triple(*from) || triple(*to)) {
        diag.error((!a ? *from : *to).value_at,
                   fmt::format("a range of `{}` runs over sizes (\"256KiB\") or plain numbers", key.path),
                   "list words (congestion controls, qdiscs) or triples (tcp_rmem) as values: [\"cubic\", \"bbr\"]");
        return false;
    }
    if (!(*a > 0) || !(*b >= *a)) {
        diag.error(to->value_at, fmt::format("the range of `{}` must run upwards from above 0", key.path));
        return false;
    }
    // tcp_rmem and tcp_wmem take three numbers: a range runs over the maximum, the minimum
    // and default at the kernel's own (ip-sysctl.rst: 4096 131072 for rmem, 4096 16384 for wmem).
    const auto last = key.path.substr(key.path.rfind('.') + 1);
    const std::string triple_head = last == "tcp_rmem" ? "4096 131072" : last == "tcp_wmem" ? "4096 16384" : "";
    double factor = 0, add = 0;
    if (scale) {
        std::string f = *scale;
        if (f.size() < 2 || f[0] != 'x' || !std::all_of(f.begin() + 1, f.end(), ::isdigit) || f.size() > 4 ||
            std::stoi(f.substr(1)) < 2) {
            diag.error(r.value_at("scale"),
                       fmt::format("`scale` must be \"xK\" for a whole K of 2 or more, such as \"x2\"; not \"{}\"", f));
            return false;
        }
        factor = std::stoi(f.substr(1));
    } else {
        auto s = amount_of(*step);
        if (!s || !(*s > 0)) {
            diag.error(step->value_at, "`step` must be a size or a number above 0");
            return false;
        }
        add = *s;
    }
    for (double v = *a; v <= *b * (1 + 1e-12); v = factor ? v * factor : v + add) {
        if (key.values.size() >= kMaxTuneCandidates) {
            diag.error(range.value_at,
                       fmt::format("the range of `{}` makes more than {} values", key.path, kMaxTuneCandidates));
            return false;
        }
        auto whole = static_cast<std::uint64_t>(std::llround(v));
        key.value_at.push_back(range.value_at);
        key.amounts.push_back(static_cast<double>(whole));
        if (!triple_head.empty()) {  // a range of tcp_rmem's or tcp_wmem's maximum
            auto text = fmt::format("{} {}", triple_head, whole);
            key.values.push_back(nlohmann::json(text).dump());
            key.labels.push_back(text);
            continue;
        }
        key.values.push_back(std::to_string(whole));
        key.labels.push_back(sized ? units::format_size(whole) : std::to_string(whole));
    }
    return true;
}

// "PROBE.METRIC OP VALUE".
std::optional<TuneConstraint> constraint_of(const Node& leaf, const Experiment& exp, Diagnostics& diag) {
    auto text = leaf.kind == Node::Kind::value ? leaf.value->value_exact<std::string>() : std::nullopt;
    const char* form = "write \"PROBE.METRIC <= VALUE\" or \">=\", such as \"rtt.rtt_p99 <= 60ms\"";
    if (!text) {
        diag.error(leaf.value_at, "a constraint is a string", form);
        return std::nullopt;
    }
    std::size_t op = text->find("<=");
    bool at_most = true;
    if (op == std::string::npos) {
        op = text->find(">=");
        at_most = false;
    }
    if (op == std::string::npos) {
        diag.error(leaf.value_at, fmt::format("the constraint \"{}\" has no `<=` or `>=`", *text), form);
        return std::nullopt;
    }
    auto trim = [](std::string s) {
        s.erase(0, s.find_first_not_of(' '));
        s.erase(s.find_last_not_of(' ') + 1);
        return s;
    };
    auto name = trim(text->substr(0, op)), value = trim(text->substr(op + 2));
    auto ref = metric_ref(name, exp.trials.front().probes, leaf.value_at, diag);
    if (!ref) return std::nullopt;
    TuneConstraint c{*ref, at_most, 0, *text, leaf.value_at};
    auto bad = [&](const std::string& why) {
        diag.error(leaf.value_at, fmt::format("the constraint \"{}\": {}", *text, why), form);
        return std::nullopt;
    };
    switch (ref->unit) {
        case probes::Unit::seconds: {
            auto d = units::parse_duration(value);
            if (!units::ok(d)) return bad(std::get<units::UnitError>(d).message);
            c.bound = std::chrono::duration<double>(std::get<std::chrono::nanoseconds>(d)).count();
            break;
        }
        case probes::Unit::bits_per_second: {
            auto r = units::parse_rate(value);
            if (!units::ok(r)) return bad(std::get<units::UnitError>(r).message);
            c.bound = static_cast<double>(std::get<std::uint64_t>(r));
            break;
        }
        case probes::Unit::bytes: {
            auto s = units::parse_size(value);
            if (!units::ok(s)) return bad(std::get<units::UnitError>(s).message);
            c.bound = static_cast<double>(std::get<std::uint64_t>(s));
            break;
        }
        case probes::Unit::fraction: {
            auto p = units::parse_percent(value);
            if (!units::ok(p)) return bad(std::get<units::UnitError>(p).message);
            c.bound = std::get<double>(p);
            break;
        }
        default: {
            char* end = nullptr;
            c.bound = std::strtod(value.c_str(), &end);
            if (value.empty() || *end || !std::isfinite(c.bound))
                return bad(fmt::format("`{}` is not a number", value));
        }
    }
    return c;
}

}  // namespace

std::optional<MetricRef> metric_ref(const std::string& text, const std::vector<probes::ProbeSpec>& probes,
                                    const Location& at, Diagnostics& diag) {
    auto dot = text.find('.');
    std::vector<std::string> names;
    for (const auto& p : probes) names.push_back(p.name);
    if (dot == std::string::npos) {
        diag.error(at, fmt::format("`{}` must name a probe and its metric: PROBE.METRIC, such as \"{}.{}\"", text,
                                   probes.empty() ? "bulk" : probes.front().name,
                                   probes.empty() ? "throughput" : probes::main_metric(probes.front().kind)));
        return std::nullopt;
    }
    auto probe = text.substr(0, dot), metric = text.substr(dot + 1);
    auto p = std::find_if(probes.begin(), probes.end(), [&](const auto& x) { return x.name == probe; });
    if (p == probes.end()) {
        auto guess = did_you_mean(probe, names);
        diag.error(at, fmt::format("no probe named `{}`{}", probe,
                                   guess.empty() ? "" : fmt::format("; did you mean `{}`?", guess)));
        return std::nullopt;
    }
    const auto* kind = probes::find_kind(p->kind);
    const probes::MetricSpec* m = kind ? probes::find_metric(*kind, metric) : nullptr;
    if (!m && kind) m = probes::find_metric(*kind, p->kind + "_" + metric);  // rtt.p99: rtt_p99
    MetricRef ref{probe, "", probes::Unit::count, true};
    if (m) {
        ref.metric = m->name, ref.unit = m->unit, ref.higher_is_better = m->higher_is_better;
        return ref;
    }
    for (const auto& o : p->outputs)
        if (o.name == metric) {
            ref.metric = o.name, ref.unit = o.unit, ref.higher_is_better = o.higher_is_better;
            return ref;
        }
    std::vector<std::string> metrics;
    if (kind)
        for (const auto& ms : kind->metrics) metrics.emplace_back(ms.name);
    for (const auto& o : p->outputs) metrics.push_back(o.name);
    auto guess = did_you_mean(metric, metrics);
    diag.error(at,
               fmt::format("probe `{}` ({}) has no metric `{}`{}", probe, p->kind, metric,
                           guess.empty() ? "" : fmt::format("; did you mean `{}`?", guess)),
               fmt::format("metrics: {}", fmt::join(metrics, ", ")));
    return std::nullopt;
}

std::optional<TuneSpec> parse_tune(const Node& tune, const Experiment& exp, Diagnostics& diag) {
    const std::size_t errors = diag.error_count();
    TuneSpec t;
    t.at = tune.key_at.line ? tune.key_at : tune.value_at;
    Reader r(tune, "[tune]", diag);
    auto goal = r.string("goal");
    auto direction = r.choice("direction", {"higher", "lower"});
    const Node* constraints = r.raw("constraints");
    if (auto b = r.duration("budget", std::chrono::seconds(10))) t.budget = *b;
    if (auto tol = r.percent("tolerance")) {
        if (!(*tol > 0) || *tol > 0.5)
            diag.error(r.value_at("tolerance"), "`tolerance` must be above 0% and at most 50%",
                       "it is how much below the best a cheaper candidate may be and still be recommended");
        t.tolerance = *tol;
    }
    if (auto bb = r.size("buffer_budget")) t.buffer_budget = *bb;
    const Node* space = r.table("space");
    r.finish();
    if (exp.trials.empty()) return std::nullopt;
    const auto& probes = exp.trials.front().probes;
    if (!goal) {
        if (!r.has("goal"))
            diag.error(t.at, "[tune] needs `goal`: the metric to improve, PROBE.METRIC",
                       fmt::format("such as goal = \"{}.{}\"", probes.empty() ? "bulk" : probes.front().name,
                                   probes.empty() ? "throughput" : probes::main_metric(probes.front().kind)));
    } else if (auto ref = metric_ref(*goal, probes, r.value_at("goal"), diag)) {
        t.goal = *ref;
        if (direction) t.goal.higher_is_better = *direction == "higher";
    }
    if (constraints) {
        if (constraints->kind != Node::Kind::value || !constraints->value->is_array()) {
            diag.error(constraints->value_at, "`constraints` is a list of strings",
                       "constraints = [\"rtt.rtt_p99 <= 60ms\"]");
        } else {
            for (std::size_t i = 0; i < constraints->value->as_array()->size(); ++i)
                if (auto c = constraint_of(config::element(*constraints, i), exp, diag)) t.constraints.push_back(*c);
        }
    }
    if (!space) {
        diag.error(t.at, "[tune] needs [tune.space]: the keys to try and their values",
                   "such as [tune.space] \"sysctl.net.core.rmem_max\" = [\"4MiB\", \"16MiB\"]");
        return std::nullopt;
    }
    std::size_t product = 1;
    for (const auto& [path, value] : space->members) {
        TuneKey key;
        key.path = path;
        key.at = value.key_at;
        key.socket_buffer = socket_buffer_key(path);
        if (!check_key_path(path, value, "[tune.space]", diag)) continue;
        if (path.starts_with("service.") || path.starts_with("lab.")) {
            diag.error(value.key_at, fmt::format("[tune.space] `{}`: tune searches link, sysctl and probe keys", path),
                       "a service's settings and the lab's shape are the experiment's, not a setting to recommend");
            continue;
        }
        for (const auto& swept : exp.sweep_keys)
            if (prefix_of(swept, path) || prefix_of(path, swept))
                diag.error(value.key_at,
                           fmt::format("[tune.space] `{}` is also a [sweep] key (`{}`): the sweep's points are the "
                                       "paths tuned for, the space what is tried on each",
                                       path, swept),
                           "drop one of them");
        if (value.kind == Node::Kind::table) {
            if (!expand_range(value, key, diag)) continue;
        } else if (value.kind == Node::Kind::value && value.value->is_array()) {
            const auto n = value.value->as_array()->size();
            if (n == 0) {
                diag.error(value.value_at, fmt::format("[tune.space] `{}` has no values", path));
                continue;
            }
            bool numeric = true;
            for (std::size_t i = 0; i < n; ++i) {
                Node leaf = config::element(value, i);
                key.labels.push_back(value_text(leaf));
                auto a = amount_of(leaf);
                numeric = numeric && a.has_value();
                key.amounts.push_back(a.value_or(0));
                key.values.push_back(toml_text(leaf));
                key.value_at.push_back(leaf.value_at);
            }
            if (!numeric) key.amounts.clear();
            for (std::size_t i = 0; i < n; ++i)
                for (std::size_t j = 0; j < i; ++j)
                    if (key.labels[i] == key.labels[j])
                        diag.error(key.value_at[i],
                                   fmt::format("[tune.space] `{}` lists {} twice", path, key.labels[i]));
        } else {
            diag.error(value.value_at, fmt::format("[tune.space] `{}` must be a list of values or a range", path),
                       "[\"cubic\", \"bbr\"], or { from = \"256KiB\", to = \"64MiB\", scale = \"x2\" }");
            continue;
        }
        if (t.buffer_budget && key.socket_buffer && !key.amounts.empty()) {
            const auto within = std::count_if(key.amounts.begin(), key.amounts.end(),
                                              [&](double a) { return a <= static_cast<double>(*t.buffer_budget); });
            if (within == 0)
                diag.error(value.value_at, fmt::format("every value of `{}` is above buffer_budget ({})", path,
                                                       units::format_size(*t.buffer_budget)));
        }
        product = std::min(product * key.values.size(), kMaxTuneCandidates + 1);
        t.space.push_back(std::move(key));
    }
    if (space->members.empty())
        diag.error(space->value_at, "[tune.space] is empty: name at least one key and its values");
    if (product > kMaxTuneCandidates)
        diag.error(space->value_at,
                   fmt::format("[tune.space] makes more than {} candidates (the product of its keys' value counts)",
                               kMaxTuneCandidates),
                   "drop values or keys; a range's `scale` can take larger steps (\"x4\")");
    if (diag.error_count() != errors) return std::nullopt;
    return t;
}

}  // namespace wanlab::experiment
