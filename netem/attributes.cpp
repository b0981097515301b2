#include "netem/attributes.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include <fmt/format.h>

#include "core/error.h"
#include "core/units.h"
#include "netem/queue.h"

namespace wanlab::netem {
namespace {

using config::Node;
using config::Reader;
using nlohmann::json;
using std::chrono::nanoseconds;
using units::format_duration;
using units::format_percent;

// netem's qopt carries delay and jitter as u32 psched ticks of 64 ns (see dependency notes):
// anything longer wraps (kMaxDelay). The kernel also caps jitter at INT_MAX ns.
constexpr nanoseconds kMaxJitter{std::numeric_limits<std::int32_t>::max()};
constexpr std::int64_t kU32Max = std::numeric_limits<std::uint32_t>::max();
constexpr std::int64_t kS32Max = std::numeric_limits<std::int32_t>::max();
constexpr std::int64_t kS32Min = std::numeric_limits<std::int32_t>::min();

const std::vector<std::string> kDistributions{"normal", "pareto", "paretonormal", "experimental", "uniform"};
const std::vector<std::string> kShapers{"netem", "tbf", "htb"};
const std::vector<std::string> kLossModels{"random", "gemodel", "state"};

double fraction(std::uint32_t p) { return static_cast<double>(p) / UINT32_MAX; }
double seconds(nanoseconds d) { return static_cast<double>(d.count()) / 1e9; }

nanoseconds ticks_to_ns(std::uint32_t ticks, const Psched& psched) {
    return nanoseconds{static_cast<std::int64_t>(std::llround(ticks / psched.ticks_per_usec * 1000.0))};
}

// ---- parsing ------------------------------------------------------------------------------

void note(Direction& d, Reader& r, std::string_view key) {
    if (r.has(key)) d.at[std::string(key)] = r.key_at(key);
}

void bounded_duration(Reader& r, std::string_view key, nanoseconds max, nanoseconds& out, Direction& d) {
    auto v = r.duration(key);
    if (!v) return;
    note(d, r, key);
    if (*v > max) {
        r.diag().error(r.value_at(key), fmt::format("`{}` = {} is above the most netem can express ({})", key,
                                                    units::format_duration(*v), units::format_duration(max)));
        return;
    }
    out = *v;
}

template <class T>
void integer(Reader& r, std::string_view key, std::int64_t lo, std::int64_t hi, T& out, Direction& d) {
    if (auto v = r.integer(key, lo, hi)) {
        out = static_cast<T>(*v);
        note(d, r, key);
    }
}

void parse_distribution(Reader& r, Direction& d) {
    const Node* dist = r.raw("distribution");
    if (!dist) return;
    note(d, r, "distribution");
    auto s = dist->kind == Node::Kind::value ? dist->value->value_exact<std::string>() : std::nullopt;
    if (!s) {
        r.diag().error(dist->value_at, fmt::format("`distribution` must be a string, not {}", config::describe(*dist)));
        return;
    }
    bool path = s->find('/') != std::string::npos || s->ends_with(".dist");
    if (!path && std::find(kDistributions.begin(), kDistributions.end(), *s) == kDistributions.end()) {
        auto guess = did_you_mean(*s, kDistributions);
        r.diag().error(dist->value_at,
                       fmt::format("`distribution` = \"{}\" is not one of normal, pareto, paretonormal, "
                                   "experimental, uniform, nor a path to a .dist table{}",
                                   *s, guess.empty() ? "" : fmt::format("; did you mean \"{}\"?", guess)));
        return;
    }
    d.netem.distribution = *s == "uniform" ? "" : *s;
}

void parse_loss_table(const Node& t, Loss& loss, Diagnostics& diag) {
    Reader r(t, "`loss`", diag);
    auto model = r.choice("model", kLossModels);
    if (!r.has("model"))
        diag.error(t.value_at, "`loss` as a table needs `model`: \"random\", \"gemodel\" or \"state\"");
    auto get = [&](std::string_view key, double& out) {
        if (auto v = r.percent(key)) out = *v;
    };
    if (model == "random") {
        loss.model = Loss::Model::random;
        get("p", loss.probability);
        get("correlation", loss.correlation);
    } else if (model == "gemodel") {
        // tc: loss gemodel p [r [1-h [1-k]]]; r defaults to 1-p, 1-h to 100%, 1-k to 0%.
        loss.model = Loss::Model::gemodel;
        get("p", loss.probability);
        loss.r = 1.0 - loss.probability;
        loss.one_minus_h = 1.0;
        get("r", loss.r);
        get("1-h", loss.one_minus_h);
        get("1-k", loss.one_minus_k);
    } else if (model == "state") {
        // tc: loss state p13 [p31 [p32 [p23 [p14]]]]; p31 defaults to 1-p13, p23 to 100%.
        loss.model = Loss::Model::state;
        get("p13", loss.probability);
        loss.r = 1.0 - loss.probability;
        loss.one_minus_k = 1.0;
        get("p31", loss.r);
        get("p32", loss.one_minus_h);
        get("p23", loss.one_minus_k);
        get("p14", loss.p14);
    }
    if (model && !r.has(model == "state" ? "p13" : "p"))
        diag.error(t.value_at, fmt::format("`loss` model \"{}\" needs `{}`", *model, model == "state" ? "p13" : "p"));
    // Without a valid model the other keys cannot be judged: say nothing about them.
    if (!model)
        for (const auto& m : t.members) r.raw(m.first);
    r.finish();
}

void parse_loss(const Attribute&, Reader& r, Direction& d) {
    Loss& loss = d.netem.loss;
    const Node* n = r.raw("loss");
    if (!n) return;
    note(d, r, "loss");
    if (n->kind == Node::Kind::table) {
        parse_loss_table(*n, loss, r.diag());
    } else if (auto p = config::to_percent(*n, "loss", r.diag())) {
        loss.model = Loss::Model::random;
        loss.probability = *p;
    }
}

void parse_slot(const Attribute&, Reader& r, Direction& d) {
    const Node* t = r.table("slot");
    if (!t) return;
    note(d, r, "slot");
    Reader s(*t, "`slot`", r.diag());
    Slot slot;
    if (auto v = s.duration("min_delay")) slot.min_delay = *v;
    slot.max_delay = slot.min_delay;
    if (auto v = s.duration("max_delay")) slot.max_delay = *v;
    if (auto v = s.choice("distribution", {"normal", "pareto", "paretonormal", "experimental"})) slot.distribution = *v;
    if (auto v = s.duration("delay")) slot.dist_delay = *v;
    if (auto v = s.duration("jitter")) slot.dist_jitter = *v;
    if (auto v = s.integer("packets", 0, kS32Max)) slot.packets = static_cast<std::uint32_t>(*v);
    if (auto v = s.integer("bytes", 0, kS32Max)) slot.bytes = static_cast<std::uint32_t>(*v);
    if (slot.max_delay < slot.min_delay)
        r.diag().error(s.key_at("max_delay"), "`slot.max_delay` is below `slot.min_delay`");
    if (!slot.distribution.empty() && s.has("min_delay"))
        r.diag().error(s.key_at("distribution"),
                       "`slot.distribution` and `slot.min_delay` exclude each other: a slot is either "
                       "min_delay/max_delay or distribution/delay/jitter, as in tc");
    if (slot.distribution.empty() && !s.has("min_delay"))
        r.diag().error(t->value_at, "`slot` needs `min_delay` (or `distribution` with `delay` and `jitter`)");
    s.finish();
    d.netem.slot = slot;
}

void parse_limit(const Attribute&, Reader& r, Direction& d) {
    const Node* n = r.raw("limit");
    if (!n) return;
    note(d, r, "limit");
    if (n->kind == Node::Kind::value && n->value->value_exact<std::string>() == std::optional<std::string>("auto"))
        return;
    if (n->kind == Node::Kind::value && n->value->is_integer()) {
        if (auto v = config::to_integer(*n, "limit", 1, kU32Max, r.diag()))
            d.netem.limit = static_cast<std::uint32_t>(*v);
        return;
    }
    r.diag().error(n->value_at,
                   fmt::format("`limit` must be \"auto\" or a number of packets, not {}", config::describe(*n)));
}

void parse_rate(const Attribute&, Reader& r, Direction& d) {
    if (auto rate = r.rate("rate")) {
        d.rate_bps = *rate;
        note(d, r, "rate");
    }
}

void parse_shaper(const Attribute&, Reader& r, Direction& d) {
    if (auto s = r.choice("shaper", kShapers)) {
        note(d, r, "shaper");
        d.shaper = *s == "tbf" ? Shaper::tbf : *s == "htb" ? Shaper::htb : Shaper::netem;
    }
}

void parse_ecn(const Attribute&, Reader& r, Direction& d) {
    if (auto e = r.boolean("ecn")) {
        d.netem.ecn = *e;
        note(d, r, "ecn");
    }
}

// ---- comparing ----------------------------------------------------------------------------

void probability_field(std::vector<Mismatch>& out, const std::string& field, double asked, double kernel) {
    if (probability(asked) != probability(kernel))
        out.push_back({field, units::format_percent(asked), units::format_percent(kernel)});
}

void duration_field(std::vector<Mismatch>& out, const std::string& field, nanoseconds asked, nanoseconds kernel) {
    // qopt carries 64 ns ticks: anything within one tick is the same setting.
    if (std::llabs((asked - kernel).count()) > 64)
        out.push_back({field, units::format_duration(asked), units::format_duration(kernel)});
}

template <class T>
void exact_field(std::vector<Mismatch>& out, const std::string& field, T asked, T kernel) {
    if (asked != kernel) out.push_back({field, fmt::format("{}", asked), fmt::format("{}", kernel)});
}

void compare_loss(const Attribute&, const Netem& asked, const Netem& k, std::vector<Mismatch>& out) {
    const Loss& a = asked.loss;
    if (a.model != k.loss.model && !(a.model == Loss::Model::random && a.probability == 0))
        out.push_back({"loss model", to_string(a.model), to_string(k.loss.model)});
    probability_field(out, "loss", a.probability, k.loss.probability);
    if (a.model != Loss::Model::gemodel && a.model != Loss::Model::state) return;
    bool ge = a.model == Loss::Model::gemodel;
    probability_field(out, ge ? "loss r" : "loss p31", a.r, k.loss.r);
    probability_field(out, ge ? "loss 1-h" : "loss p32", a.one_minus_h, k.loss.one_minus_h);
    probability_field(out, ge ? "loss 1-k" : "loss p23", a.one_minus_k, k.loss.one_minus_k);
    if (!ge) probability_field(out, "loss p14", a.p14, k.loss.p14);
}

void compare_slot(const Attribute&, const Netem& asked, const Netem& k, std::vector<Mismatch>& out) {
    if (asked.slot.has_value() != k.slot.has_value()) {
        out.push_back({"slot", asked.slot ? "set" : "none", k.slot ? "set" : "none"});
    } else if (asked.slot) {
        duration_field(out, "slot.min_delay", asked.slot->min_delay, k.slot->min_delay);
        duration_field(out, "slot.max_delay", asked.slot->max_delay, k.slot->max_delay);
        exact_field(out, "slot.packets", asked.slot->packets, k.slot->packets);
        exact_field(out, "slot.bytes", asked.slot->bytes, k.slot->bytes);
    }
}

// ---- tc arguments -------------------------------------------------------------------------

void percent_with_correlation(std::string& out, const char* word, double p, double corr) {
    if (p <= 0) return;
    out += fmt::format(" {} {}", word, format_percent(p));
    if (corr > 0) out += " " + format_percent(corr);
}

void tc_delay(const Netem& n, std::string& out) {
    if (!n.delay.count() && !n.jitter.count()) return;
    out += " delay " + format_duration(n.delay);
    if (n.jitter.count()) {
        out += " " + format_duration(n.jitter);
        if (n.delay_correlation > 0) out += " " + format_percent(n.delay_correlation);
    }
    if (!n.distribution.empty()) out += " distribution " + n.distribution;
}

void tc_loss(const Netem& n, std::string& out) {
    const Loss& l = n.loss;
    switch (l.model) {
        case Loss::Model::random:
            out += " loss random " + format_percent(l.probability);
            if (l.correlation > 0) out += " " + format_percent(l.correlation);
            return;
        case Loss::Model::gemodel:
            out += fmt::format(" loss gemodel {} {} {} {}", format_percent(l.probability), format_percent(l.r),
                               format_percent(l.one_minus_h), format_percent(l.one_minus_k));
            return;
        case Loss::Model::state:
            out += fmt::format(" loss state {} {} {} {} {}", format_percent(l.probability), format_percent(l.r),
                               format_percent(l.one_minus_h), format_percent(l.one_minus_k), format_percent(l.p14));
            return;
        default: return;
    }
}

void tc_reorder(const Netem& n, std::string& out) {
    if (n.reorder <= 0) return;
    percent_with_correlation(out, "reorder", n.reorder, n.reorder_correlation);
    if (n.gap) out += fmt::format(" gap {}", n.gap);
}

void tc_rate(const Netem& n, std::string& out) {
    if (!n.rate_bps) return;
    out += " rate " + units::format_rate(n.rate_bps);
    if (n.packet_overhead || n.cell_size || n.cell_overhead)
        out += fmt::format(" {} {} {}", n.packet_overhead, n.cell_size, n.cell_overhead);
}

void tc_slot(const Netem& n, std::string& out) {
    if (!n.slot) return;
    const Slot& s = *n.slot;
    out += " slot";
    if (s.distribution.empty())
        out += fmt::format(" {} {}", format_duration(s.min_delay), format_duration(s.max_delay));
    else
        out += fmt::format(" distribution {} {} {}", s.distribution, format_duration(s.dist_delay),
                           format_duration(s.dist_jitter));
    if (s.packets) out += fmt::format(" packets {}", s.packets);
    if (s.bytes) out += fmt::format(" bytes {}", s.bytes);
}

// ---- plan JSON ----------------------------------------------------------------------------

json loss_json(const Loss& l) {
    json j{{"model", to_string(l.model)}};
    switch (l.model) {
        case Loss::Model::random:
            j["p"] = l.probability;
            j["correlation"] = l.correlation;
            break;
        case Loss::Model::gemodel:
            j.update({{"p", l.probability}, {"r", l.r}, {"1-h", l.one_minus_h}, {"1-k", l.one_minus_k}});
            break;
        case Loss::Model::state:
            j.update(
                {{"p13", l.probability}, {"p31", l.r}, {"p32", l.one_minus_h}, {"p23", l.one_minus_k}, {"p14", l.p14}});
            break;
        default: break;
    }
    return j;
}

json slot_json(const std::optional<Slot>& slot) {
    if (!slot) return nullptr;
    const auto& s = *slot;
    return {{"min_delay", seconds(s.min_delay)},
            {"max_delay", seconds(s.max_delay)},
            {"distribution", s.distribution},
            {"delay", seconds(s.dist_delay)},
            {"jitter", seconds(s.dist_jitter)},
            {"packets", s.packets},
            {"bytes", s.bytes}};
}

// ---- the agent's JSON ---------------------------------------------------------------------

// A value as the agent's JSON carries it: exactly, durations as integer nanoseconds.
template <class T>
json agent_value(const T& v) {
    return v;
}
json agent_value(nanoseconds v) { return v.count(); }
template <class T>
void agent_value_of(const json& j, T& out) {
    j.get_to(out);
}
void agent_value_of(const json& j, nanoseconds& out) { out = nanoseconds{j.get<std::int64_t>()}; }

// A field of the netem qdisc that travels under "netem" by its row's key.
template <auto Field>
void send_netem(const Attribute& a, const Direction& d, json& j) {
    j["netem"][a.key] = agent_value(d.netem.*Field);
}
template <auto Field>
void receive_netem(const Attribute& a, const json& j, Direction& d) {
    agent_value_of(j.at("netem").at(a.key), d.netem.*Field);
}

template <class E>
E enum_of(const json& j, E last, const char* what) {
    auto v = j.get<int>();
    if (v < 0 || v > static_cast<int>(last)) throw Error(what);
    return static_cast<E>(v);
}

void send_loss(const Attribute& a, const Direction& d, json& j) {
    const Loss& l = d.netem.loss;
    auto& o = j["netem"][a.key];
    o["model"] = static_cast<int>(l.model);
    o["probability"] = l.probability;
    o["r"] = l.r;
    o["one_minus_h"] = l.one_minus_h;
    o["one_minus_k"] = l.one_minus_k;
    o["p14"] = l.p14;
}

void receive_loss(const Attribute& a, const json& j, Direction& d) {
    const auto& o = j.at("netem").at(a.key);
    Loss& l = d.netem.loss;
    l.model = enum_of(o.at("model"), Loss::Model::state, "an unknown loss model");
    o.at("probability").get_to(l.probability);
    o.at("r").get_to(l.r);
    o.at("one_minus_h").get_to(l.one_minus_h);
    o.at("one_minus_k").get_to(l.one_minus_k);
    o.at("p14").get_to(l.p14);
}

json slot_agent_json(const std::optional<Slot>& s) {
    if (!s) return nullptr;
    return {{"min_delay", s->min_delay.count()},
            {"max_delay", s->max_delay.count()},
            {"distribution", s->distribution},
            {"dist_delay", s->dist_delay.count()},
            {"dist_jitter", s->dist_jitter.count()},
            {"packets", s->packets},
            {"bytes", s->bytes}};
}

std::optional<Slot> slot_of_agent_json(const json& j) {
    if (j.is_null()) return std::nullopt;
    Slot s;
    agent_value_of(j.at("min_delay"), s.min_delay);
    agent_value_of(j.at("max_delay"), s.max_delay);
    j.at("distribution").get_to(s.distribution);
    agent_value_of(j.at("dist_delay"), s.dist_delay);
    agent_value_of(j.at("dist_jitter"), s.dist_jitter);
    j.at("packets").get_to(s.packets);
    j.at("bytes").get_to(s.bytes);
    return s;
}

// An optional number: null when unset.
template <class T>
json optional_json(const std::optional<T>& v) {
    return v ? json(*v) : json(nullptr);
}
template <class T>
void optional_of(const json& j, std::optional<T>& out) {
    if (!j.is_null()) out = j.get<T>();
}

// ---- rows ---------------------------------------------------------------------------------

// A percentage of the netem qdisc (a probability or a correlation): parsed, compared at the
// kernel's u32 resolution, printed in JSON as a fraction.
template <double Netem::*Field>
Attribute percent(const char* key, int tc_rank, decltype(Attribute::encode) encode, decltype(Attribute::decode) decode,
                  decltype(Attribute::tc) tc = nullptr) {
    return {key,
            true,
            tc_rank,
            [](const Attribute& a, Reader& r, Direction& d) {
                if (auto v = r.percent(a.key)) {
                    d.netem.*Field = *v;
                    note(d, r, a.key);
                }
            },
            encode,
            decode,
            [](const Attribute& a, const Netem& x, const Netem& k, std::vector<Mismatch>& out) {
                probability_field(out, a.key, x.*Field, k.*Field);
            },
            tc,
            [](const Attribute& a, const Direction& d, json& j) { j[a.key] = d.netem.*Field; },
            send_netem<Field>,
            receive_netem<Field>};
}

// A whole number of the netem qdisc in [Lo, Hi], compared exactly.
template <class T, T Netem::*Field, std::int64_t Lo, std::int64_t Hi>
Attribute number(const char* key, decltype(Attribute::encode) encode, decltype(Attribute::decode) decode) {
    return {key,
            true,
            -1,
            [](const Attribute& a, Reader& r, Direction& d) { integer(r, a.key, Lo, Hi, d.netem.*Field, d); },
            encode,
            decode,
            [](const Attribute& a, const Netem& x, const Netem& k, std::vector<Mismatch>& out) {
                exact_field(out, a.key, x.*Field, k.*Field);
            },
            nullptr,
            [](const Attribute& a, const Direction& d, json& j) { j[a.key] = d.netem.*Field; },
            send_netem<Field>,
            receive_netem<Field>};
}

std::vector<Attribute> make_rows() {
    std::vector<Attribute> rows;
    // delay [jitter [correlation]] [distribution]: tc prints them as one group, after limit.
    rows.push_back(
        {"delay", true, 1,
         [](const Attribute& a, Reader& r, Direction& d) { bounded_duration(r, a.key, kMaxDelay, d.netem.delay, d); },
         [](const Netem& n, const Psched& p, NetemWire& w) {
             w.qopt.latency = p.ticks(n.delay);
             if (n.delay.count() >= kU32Max) w.latency64 = n.delay.count();
         },
         [](const NetemWire& w, const Psched& p, Netem& n) {
             n.delay = w.latency64 ? nanoseconds{*w.latency64} : ticks_to_ns(w.qopt.latency, p);
         },
         [](const Attribute& a, const Netem& x, const Netem& k, std::vector<Mismatch>& out) {
             duration_field(out, a.key, x.delay, k.delay);
         },
         tc_delay, [](const Attribute& a, const Direction& d, json& j) { j[a.key] = seconds(d.netem.delay); },
         send_netem<&Netem::delay>, receive_netem<&Netem::delay>});
    rows.push_back(
        {"jitter", true, -1,
         [](const Attribute& a, Reader& r, Direction& d) { bounded_duration(r, a.key, kMaxJitter, d.netem.jitter, d); },
         [](const Netem& n, const Psched& p, NetemWire& w) {
             w.qopt.jitter = p.ticks(n.jitter);
             if (n.jitter.count() >= kU32Max) w.jitter64 = n.jitter.count();
         },
         [](const NetemWire& w, const Psched& p, Netem& n) {
             n.jitter = w.jitter64 ? nanoseconds{*w.jitter64} : ticks_to_ns(w.qopt.jitter, p);
         },
         [](const Attribute& a, const Netem& x, const Netem& k, std::vector<Mismatch>& out) {
             duration_field(out, a.key, x.jitter, k.jitter);
         },
         nullptr, [](const Attribute& a, const Direction& d, json& j) { j[a.key] = seconds(d.netem.jitter); },
         send_netem<&Netem::jitter>, receive_netem<&Netem::jitter>});
    rows.push_back(percent<&Netem::delay_correlation>(
        "correlation", -1,
        [](const Netem& n, const Psched&, NetemWire& w) { w.corr.delay_corr = probability(n.delay_correlation); },
        [](const NetemWire& w, const Psched&, Netem& n) { n.delay_correlation = fraction(w.corr.delay_corr); }));
    // The agent's JSON names it by its field, as agent protocol 1 did.
    rows.back().send = [](const Attribute&, const Direction& d, json& j) {
        j["netem"]["delay_correlation"] = d.netem.delay_correlation;
    };
    rows.back().receive = [](const Attribute&, const json& j, Direction& d) {
        j.at("netem").at("delay_correlation").get_to(d.netem.delay_correlation);
    };
    // The table itself is loaded and sent by encode.cpp; the kernel never dumps it.
    rows.push_back({"distribution", true, -1,
                    [](const Attribute&, Reader& r, Direction& d) { parse_distribution(r, d); }, nullptr, nullptr,
                    nullptr, nullptr,
                    [](const Attribute& a, const Direction& d, json& j) {
                        j[a.key] = d.netem.distribution.empty() ? "uniform" : d.netem.distribution;
                    },
                    send_netem<&Netem::distribution>, receive_netem<&Netem::distribution>});
    rows.push_back({"limit", true, 0, parse_limit,
                    [](const Netem& n, const Psched&, NetemWire& w) { w.qopt.limit = n.limit_packets; },
                    [](const NetemWire& w, const Psched&, Netem& n) {
                        n.limit_packets = w.qopt.limit;
                        n.limit = w.qopt.limit;
                    },
                    [](const Attribute& a, const Netem& x, const Netem& k, std::vector<Mismatch>& out) {
                        exact_field(out, a.key, x.limit_packets, k.limit_packets);
                    },
                    [](const Netem& n, std::string& out) { out += fmt::format(" limit {}", n.limit_packets); },
                    [](const Attribute& a, const Direction& d, json& j) {
                        j[a.key] = d.netem.limit_packets;
                        j["limit_auto"] = !d.netem.limit.has_value();
                    },
                    [](const Attribute& a, const Direction& d, json& j) {
                        j["netem"][a.key] = optional_json(d.netem.limit);
                        j["netem"]["limit_packets"] = d.netem.limit_packets;
                    },
                    [](const Attribute& a, const json& j, Direction& d) {
                        optional_of(j.at("netem").at(a.key), d.netem.limit);
                        j.at("netem").at("limit_packets").get_to(d.netem.limit_packets);
                    }});
    rows.push_back(
        {"loss", true, 2, parse_loss,
         [](const Netem& n, const Psched&, NetemWire& w) {
             const Loss& l = n.loss;
             w.qopt.loss = l.model == Loss::Model::random ? probability(l.probability) : 0;
             // tc's "1-h" is the loss probability in the bad state; the kernel wants h.
             if (l.model == Loss::Model::gemodel)
                 w.gemodel = tc_netem_gemodel{probability(l.probability), probability(l.r),
                                              UINT32_MAX - probability(l.one_minus_h), probability(l.one_minus_k)};
             if (l.model == Loss::Model::state)
                 w.gimodel = tc_netem_gimodel{probability(l.probability), probability(l.r), probability(l.one_minus_h),
                                              probability(l.p14), probability(l.one_minus_k)};
         },
         [](const NetemWire& w, const Psched&, Netem& n) {
             if (w.gemodel) {
                 const auto& ge = *w.gemodel;
                 n.loss = Loss{Loss::Model::gemodel, fraction(ge.p),  0, fraction(ge.r),
                               1.0 - fraction(ge.h), fraction(ge.k1), 0};
             } else if (w.gimodel) {
                 const auto& gi = *w.gimodel;
                 n.loss = Loss{Loss::Model::state, fraction(gi.p13), 0, fraction(gi.p31), fraction(gi.p32),
                               fraction(gi.p23),   fraction(gi.p14)};
             } else if (w.qopt.loss) {
                 n.loss.model = Loss::Model::random;
                 n.loss.probability = fraction(w.qopt.loss);
             }
         },
         compare_loss, tc_loss,
         [](const Attribute& a, const Direction& d, json& j) { j[a.key] = loss_json(d.netem.loss); }, send_loss,
         receive_loss});
    // Random loss's correlation (the models carry their own); printed by loss, in its JSON.
    rows.push_back({"loss_correlation", true, -1,
                    [](const Attribute& a, Reader& r, Direction& d) {
                        if (auto c = r.percent(a.key)) {
                            note(d, r, a.key);
                            d.netem.loss.correlation = *c;
                        }
                    },
                    [](const Netem& n, const Psched&, NetemWire& w) {
                        w.corr.loss_corr = probability(n.loss.model == Loss::Model::random ? n.loss.correlation : 0);
                    },
                    [](const NetemWire& w, const Psched&, Netem& n) {
                        if (!w.gemodel && !w.gimodel) n.loss.correlation = fraction(w.corr.loss_corr);
                    },
                    [](const Attribute& a, const Netem& x, const Netem& k, std::vector<Mismatch>& out) {
                        if (x.loss.model == Loss::Model::random)
                            probability_field(out, a.key, x.loss.correlation, k.loss.correlation);
                    },
                    nullptr, nullptr,
                    [](const Attribute&, const Direction& d, json& j) {
                        j["netem"]["loss"]["correlation"] = d.netem.loss.correlation;
                    },
                    [](const Attribute&, const json& j, Direction& d) {
                        j.at("netem").at("loss").at("correlation").get_to(d.netem.loss.correlation);
                    }});
    rows.push_back(percent<&Netem::duplicate>(
        "duplicate", 5,
        [](const Netem& n, const Psched&, NetemWire& w) { w.qopt.duplicate = probability(n.duplicate); },
        [](const NetemWire& w, const Psched&, Netem& n) { n.duplicate = fraction(w.qopt.duplicate); },
        [](const Netem& n, std::string& out) {
            percent_with_correlation(out, "duplicate", n.duplicate, n.duplicate_correlation);
        }));
    rows.push_back(percent<&Netem::duplicate_correlation>(
        "duplicate_correlation", -1,
        [](const Netem& n, const Psched&, NetemWire& w) { w.corr.dup_corr = probability(n.duplicate_correlation); },
        [](const NetemWire& w, const Psched&, Netem& n) { n.duplicate_correlation = fraction(w.corr.dup_corr); }));
    rows.push_back(percent<&Netem::reorder>(
        "reorder", 6,
        [](const Netem& n, const Psched&, NetemWire& w) { w.reorder.probability = probability(n.reorder); },
        [](const NetemWire& w, const Psched&, Netem& n) { n.reorder = fraction(w.reorder.probability); }, tc_reorder));
    rows.push_back(percent<&Netem::reorder_correlation>(
        "reorder_correlation", -1,
        [](const Netem& n, const Psched&, NetemWire& w) { w.reorder.correlation = probability(n.reorder_correlation); },
        [](const NetemWire& w, const Psched&, Netem& n) { n.reorder_correlation = fraction(w.reorder.correlation); }));
    rows.push_back(number<std::uint32_t, &Netem::gap, 1, kU32Max>(
        "gap", [](const Netem& n, const Psched&, NetemWire& w) { w.qopt.gap = n.gap; },
        [](const NetemWire& w, const Psched&, Netem& n) { n.gap = w.qopt.gap; }));
    rows.push_back(percent<&Netem::corrupt>(
        "corrupt", 4,
        [](const Netem& n, const Psched&, NetemWire& w) { w.corrupt.probability = probability(n.corrupt); },
        [](const NetemWire& w, const Psched&, Netem& n) { n.corrupt = fraction(w.corrupt.probability); },
        [](const Netem& n, std::string& out) {
            percent_with_correlation(out, "corrupt", n.corrupt, n.corrupt_correlation);
        }));
    rows.push_back(percent<&Netem::corrupt_correlation>(
        "corrupt_correlation", -1,
        [](const Netem& n, const Psched&, NetemWire& w) { w.corrupt.correlation = probability(n.corrupt_correlation); },
        [](const NetemWire& w, const Psched&, Netem& n) { n.corrupt_correlation = fraction(w.corrupt.correlation); }));
    // The direction's rate, whichever shaper carries it; netem's own (netem.rate_bps) when
    // shaper = "netem", set once the whole table is read. It travels as bytes per second.
    rows.push_back({"rate", true, 7, parse_rate,
                    [](const Netem& n, const Psched&, NetemWire& w) {
                        std::uint64_t bytes = n.rate_bps / 8;
                        if (bytes > UINT32_MAX) w.rate64 = bytes;
                        w.rate.rate = bytes > UINT32_MAX ? UINT32_MAX : static_cast<std::uint32_t>(bytes);
                    },
                    [](const NetemWire& w, const Psched&, Netem& n) {
                        n.rate_bps = (w.rate64 ? *w.rate64 : static_cast<std::uint64_t>(w.rate.rate)) * 8;
                    },
                    [](const Attribute& a, const Netem& x, const Netem& k, std::vector<Mismatch>& out) {
                        if (x.rate_bps / 8 != k.rate_bps / 8)
                            out.push_back({a.key, units::format_rate(x.rate_bps), units::format_rate(k.rate_bps)});
                    },
                    tc_rate, [](const Attribute& a, const Direction& d, json& j) { j[a.key] = d.rate_bps; },
                    [](const Attribute&, const Direction& d, json& j) {
                        j["rate_bps"] = d.rate_bps;
                        j["netem"]["rate_bps"] = d.netem.rate_bps;
                    },
                    [](const Attribute&, const json& j, Direction& d) {
                        j.at("rate_bps").get_to(d.rate_bps);
                        j.at("netem").at("rate_bps").get_to(d.netem.rate_bps);
                    }});
    rows.push_back(number<std::int32_t, &Netem::packet_overhead, kS32Min, kS32Max>(
        "packet_overhead",
        [](const Netem& n, const Psched&, NetemWire& w) { w.rate.packet_overhead = n.packet_overhead; },
        [](const NetemWire& w, const Psched&, Netem& n) { n.packet_overhead = w.rate.packet_overhead; }));
    rows.push_back(number<std::uint32_t, &Netem::cell_size, 0, kU32Max>(
        "cell_size", [](const Netem& n, const Psched&, NetemWire& w) { w.rate.cell_size = n.cell_size; },
        [](const NetemWire& w, const Psched&, Netem& n) { n.cell_size = w.rate.cell_size; }));
    rows.push_back(number<std::int32_t, &Netem::cell_overhead, kS32Min, kS32Max>(
        "cell_overhead", [](const Netem& n, const Psched&, NetemWire& w) { w.rate.cell_overhead = n.cell_overhead; },
        [](const NetemWire& w, const Psched&, Netem& n) { n.cell_overhead = w.rate.cell_overhead; }));
    // The qdiscs below netem (encode.h builds them, readback.h checks them).
    rows.push_back({"shaper", true, -1, parse_shaper, nullptr, nullptr, nullptr, nullptr,
                    [](const Attribute& a, const Direction& d, json& j) { j[a.key] = to_string(d.shaper); },
                    [](const Attribute& a, const Direction& d, json& j) { j[a.key] = static_cast<int>(d.shaper); },
                    [](const Attribute& a, const json& j, Direction& d) {
                        d.shaper = enum_of(j.at(a.key), Shaper::htb, "an unknown shaper or queue");
                    }});
    // `qdisc` (a name or a table) and `qdisc_limit` are read together (netem/queue.h).
    rows.push_back({"qdisc", true, -1, [](const Attribute&, Reader& r, Direction& d) { parse_queue(r, d); }, nullptr,
                    nullptr, nullptr, nullptr,
                    [](const Attribute& a, const Direction& d, json& j) {
                        j[a.key] = to_string(d.queue);
                        json params = json::object();
                        for (const auto& [k, v] : queue_param_list(d)) params[k] = v;
                        if (!params.empty()) j["qdisc_params"] = params;
                    },
                    [](const Attribute&, const Direction& d, json& j) {
                        j["queue"] = static_cast<int>(d.queue);
                        j["queue_params"] = d.queue_params;
                    },
                    [](const Attribute&, const json& j, Direction& d) {
                        d.queue = enum_of(j.at("queue"), Queue::fq, "an unknown shaper or queue");
                        j.at("queue_params").get_to(d.queue_params);
                    }});
    rows.push_back({"qdisc_limit", true, -1, [](const Attribute&, Reader&, Direction&) {}, nullptr, nullptr, nullptr,
                    nullptr, [](const Attribute& a, const Direction& d, json& j) { j[a.key] = d.queue_limit; },
                    [](const Attribute&, const Direction& d, json& j) { j["queue_limit"] = d.queue_limit; },
                    [](const Attribute&, const json& j, Direction& d) { j.at("queue_limit").get_to(d.queue_limit); }});
    rows.push_back({"ecn", true, 3, parse_ecn,
                    [](const Netem& n, const Psched&, NetemWire& w) { w.ecn = n.ecn ? 1 : 0; },
                    [](const NetemWire& w, const Psched&, Netem& n) { n.ecn = w.ecn != 0; },
                    [](const Attribute& a, const Netem& x, const Netem& k, std::vector<Mismatch>& out) {
                        exact_field(out, a.key, x.ecn, k.ecn);
                    },
                    [](const Netem& n, std::string& out) {
                        if (n.ecn) out += " ecn";
                    },
                    [](const Attribute& a, const Direction& d, json& j) { j[a.key] = d.netem.ecn; },
                    send_netem<&Netem::ecn>, receive_netem<&Netem::ecn>});
    rows.push_back(
        {"slot", false, 8, parse_slot,
         [](const Netem& n, const Psched&, NetemWire& w) {
             tc_netem_slot slot{};
             if (n.slot) {
                 slot.min_delay = n.slot->min_delay.count();
                 slot.max_delay = n.slot->max_delay.count();
                 slot.max_packets = static_cast<std::int32_t>(n.slot->packets);
                 slot.max_bytes = static_cast<std::int32_t>(n.slot->bytes);
                 slot.dist_delay = n.slot->dist_delay.count();
                 slot.dist_jitter = n.slot->dist_jitter.count();
             }
             w.slot = slot;
         },
         [](const NetemWire& w, const Psched&, Netem& n) {
             if (!w.slot || !(w.slot->min_delay || w.slot->max_delay || w.slot->dist_jitter)) return;
             const tc_netem_slot& slot = *w.slot;
             Slot s;
             s.min_delay = nanoseconds{slot.min_delay};
             s.max_delay = nanoseconds{slot.max_delay};
             // The kernel reports "unlimited" as INT_MAX.
             s.packets = slot.max_packets == INT32_MAX ? 0 : static_cast<std::uint32_t>(slot.max_packets);
             s.bytes = slot.max_bytes == INT32_MAX ? 0 : static_cast<std::uint32_t>(slot.max_bytes);
             s.dist_delay = nanoseconds{slot.dist_delay};
             s.dist_jitter = nanoseconds{slot.dist_jitter};
             n.slot = s;
         },
         compare_slot, tc_slot,
         [](const Attribute& a, const Direction& d, json& j) { j[a.key] = slot_json(d.netem.slot); },
         [](const Attribute& a, const Direction& d, json& j) { j["netem"][a.key] = slot_agent_json(d.netem.slot); },
         [](const Attribute& a, const json& j, Direction& d) {
             d.netem.slot = slot_of_agent_json(j.at("netem").at(a.key));
         }});
    // netem's PRNG seed. A kernel before 6.6 drops the attribute unread and dumps none: an
    // error where `seed` was written, silence where it came from [run] seed. A kernel that
    // has it dumps the seed it picked when none was sent: compared only when one was asked.
    rows.push_back({"seed", true, 9,
                    [](const Attribute& a, Reader& r, Direction& d) {
                        if (auto v = r.integer(a.key, 0, std::numeric_limits<std::int64_t>::max())) {
                            d.netem.seed = static_cast<std::uint64_t>(*v);
                            d.netem.seed_explicit = true;
                            note(d, r, a.key);
                        }
                    },
                    [](const Netem& n, const Psched&, NetemWire& w) { w.prng_seed = n.seed; },
                    [](const NetemWire& w, const Psched&, Netem& n) { n.seed = w.prng_seed; },
                    [](const Attribute& a, const Netem& x, const Netem& k, std::vector<Mismatch>& out) {
                        if (!x.seed || (!k.seed && !x.seed_explicit)) return;
                        if (!k.seed)
                            out.push_back({a.key, std::to_string(*x.seed),
                                           "none (netem's seed needs Linux 6.6 or later; remove `seed` to run "
                                           "unseeded here)"});
                        else if (*k.seed != *x.seed)
                            out.push_back({a.key, std::to_string(*x.seed), std::to_string(*k.seed)});
                    },
                    // tc (iproute2 6.6+) takes `seed N`; a seed derived from [run] seed is
                    // wanlab's own choice and not printed.
                    [](const Netem& n, std::string& out) {
                        if (n.seed && n.seed_explicit) out += fmt::format(" seed {}", *n.seed);
                    },
                    [](const Attribute& a, const Direction& d, json& j) {
                        j[a.key] = d.netem.seed ? json(*d.netem.seed) : json(nullptr);
                    },
                    [](const Attribute& a, const Direction& d, json& j) {
                        j["netem"][a.key] = optional_json(d.netem.seed);
                        j["netem"]["seed_explicit"] = d.netem.seed_explicit;
                    },
                    [](const Attribute& a, const json& j, Direction& d) {
                        optional_of(j.at("netem").at(a.key), d.netem.seed);
                        j.at("netem").at("seed_explicit").get_to(d.netem.seed_explicit);
                    }});
    return rows;
}

}  // namespace

std::span<const Attribute> attributes() {
    static const std::vector<Attribute> rows = make_rows();
    return rows;
}

NetemWire to_wire(const Netem& n, const Psched& psched) {
    NetemWire w;
    for (const auto& a : attributes())
        if (a.encode) a.encode(n, psched, w);
    return w;
}

Netem from_wire(const NetemWire& w, const Psched& psched) {
    Netem n;
    for (const auto& a : attributes())
        if (a.decode) a.decode(w, psched, n);
    return n;
}

json to_agent_json(const Direction& d) {
    json j = json::object();
    for (const auto& a : attributes()) a.send(a, d, j);
    return j;
}

Direction from_agent_json(const json& j) {
    Direction d;
    for (const auto& a : attributes()) a.receive(a, j, d);
    return d;
}

}  // namespace wanlab::netem
