#include "tune/answer.h"

#include <cmath>

#include <fmt/format.h>

#include "core/units.h"
#include "probes/human.h"
#include "report/detail.h"
#include "report/html.h"

namespace wanlab::tune {
namespace {

using nlohmann::json;

std::string human(const Subject& s, double v) {
    return std::isfinite(v) ? probes::human(s.spec->goal.unit, v) : std::string("-");
}

std::string with_half(const Subject& s, double mean, double half) {
    if (!std::isfinite(half)) return human(s, mean);
    return fmt::format("{} +- {}", human(s, mean), human(s, half));
}

json number(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

bool changed(const Subject& s, const Candidate& c, std::size_t k) {
    return c.choice[k] != kAsWritten && c.choice[k] != s.as_written[k];
}

// The sysctl a key sets on a real machine, and which machine: "" for keys that have none.
struct Placement {
    std::string sysctl, machine;
};
Placement placement_of(const std::string& path) {
    static const std::vector<std::string> hosts{"client", "server", "router", "host"};
    if (path.starts_with("sysctl.")) {
        std::string rest = path.substr(7);
        std::string host;
        for (const auto& h : hosts)
            if (rest.starts_with(h + ".")) host = h, rest = rest.substr(h.size() + 1);
        std::string where = !host.empty()                            ? "the " + host
                            : rest.find("rmem") != std::string::npos ? "the receiving machine (it sets the window "
                                                                       "the receiver offers)"
                            : rest.find("wmem") != std::string::npos ? "the sending machine (it bounds what the "
                                                                       "sender keeps in flight)"
                                                                     : "both endpoints";
        return {rest, where};
    }
    if (path.ends_with(".congestion_control"))
        return {"net.ipv4.tcp_congestion_control", "the sending machine (congestion control acts where data is sent)"};
    return {};
}

// sysctl.d takes sizes as plain numbers: "4MiB" -> 4194304, "4096 131072 16M" -> "4096 131072
// 16777216"; a word as it is.
std::string plain_numbers(const std::string& value) {
    auto sizes = units::parse_sizes(value);
    return sizes ? fmt::format("{}", fmt::join(*sizes, " ")) : value;
}

// The measured reason for a key, as a comment line.
std::string reason(const Outcome& o, const Subject& s, std::size_t k) {
    for (const auto& c : o.contributions)
        if (c.key == k)
            return fmt::format("putting it back to {} cost {:.1f}% of {} at full length",
                               s.written[k].empty() ? "as written" : s.written[k], c.loss * 100, s.spec->goal.text());
    return "";
}

}  // namespace

std::string value_of(const Subject& s, const Candidate& c, std::size_t key) {
    if (c.choice[key] != kAsWritten) return s.spec->space[key].labels[static_cast<std::size_t>(c.choice[key])];
    return s.written[key].empty() ? "as written" : s.written[key];
}

std::string answer_text(const Outcome& o, const Subject& s) {
    const auto& spec = *s.spec;
    std::string out;
    out += fmt::format(
        "wanlab tune {} ({}): goal {} ({} is better), {} candidate{} (the file as written "
        "included), {} path{}\n",
        s.file, s.id, spec.goal.text(), spec.goal.higher_is_better ? "higher" : "lower", o.candidates,
        o.candidates == 1 ? "" : "s", s.paths.size(), s.paths.size() == 1 ? "" : "s");
    out += fmt::format("measured {:.0f} s of a {:.0f} s budget in {} stage{} (runs {})\n", o.measured_seconds,
                       std::chrono::duration<double>(spec.budget).count(), o.stages.size(),
                       o.stages.size() == 1 ? "" : "s", fmt::join(s.runs, ", "));
    if (!o.seeded_by.empty()) out += fmt::format("the baseline's diagnosis: {}\n", o.seeded_by);
    out += "\n";
    if (o.beats_baseline) {
        out += fmt::format("Recommended: {}\n", label(spec, o.recommended));
        if (!(o.best == o.recommended))
            out += fmt::format("  the best found was {}; the recommendation is the cheapest within {:.0f}% of it\n",
                               label(spec, o.best), spec.tolerance * 100);
    } else {
        out += "Recommended: no change: no setting in this space beats the baseline\n";
    }
    for (std::size_t p = 0; p < o.paths.size() && p < s.paths.size(); ++p) {
        const auto& c = o.paths[p];
        out += fmt::format("  {}: {} -> {} ({:+.1f}%, Welch p = {:.3f}{}); best {}\n", s.paths[p],
                           with_half(s, c.base_mean, c.base_half), with_half(s, c.rec_mean, c.rec_half), c.delta * 100,
                           c.p_value, c.significant ? (c.better ? ", better" : ", worse") : ", not significant",
                           with_half(s, c.best_mean, c.best_half));
    }
    if (!o.contributions.empty()) {
        out += "What each change contributes (the loss when it alone is put back as written):\n";
        for (const auto& c : o.contributions)
            out += fmt::format("  {} = {}: {:.1f}%\n", spec.space[c.key].path, value_of(s, o.recommended, c.key),
                               c.loss * 100);
    }
    for (const auto& n : o.notes) out += "note: " + n + "\n";
    out +=
        "\nThe search, stage by stage (mean of the goal per path; the score is the worst ratio to each path's best):\n";
    for (const auto& st : o.stages) {
        out += fmt::format("stage {}{}: {} candidate{}, {} each, {}{} repeats, {:.0f} s\n", st.request.number,
                           st.request.confirmation ? " (confirmation)" : "", st.request.candidates.size(),
                           st.request.candidates.size() == 1 ? "" : "s", units::format_duration(st.request.duration),
                           st.request.adaptive ? "adaptive from " : "", st.request.repeats, st.seconds);
        for (const auto& sc : st.scored) {
            std::vector<std::string> means;
            for (double m : sc.mean) means.push_back(human(s, m));
            const bool chosen = sc.candidate == o.recommended;
            out += fmt::format("  {} {}: {} (score {:.2f}){}{}\n", chosen ? "*" : " ", label(spec, sc.candidate),
                               fmt::join(means, " | "), sc.score,
                               sc.failed ? fmt::format(", {} repeat(s) failed", sc.failed) : "",
                               sc.dropped.empty() ? "" : ": dropped, " + sc.dropped);
        }
    }
    return out;
}

json answer_json(const Outcome& o, const Subject& s) {
    const auto& spec = *s.spec;
    json j;
    j["id"] = s.id;
    j["file"] = s.file;
    j["goal"] = {{"metric", spec.goal.text()}, {"higher_is_better", spec.goal.higher_is_better}};
    j["constraints"] = json::array();
    for (const auto& c : spec.constraints) j["constraints"].push_back(c.text);
    j["tolerance"] = spec.tolerance;
    j["budget_seconds"] = std::chrono::duration<double>(spec.budget).count();
    j["measured_seconds"] = o.measured_seconds;
    j["candidates"] = o.candidates;
    j["beats_baseline"] = o.beats_baseline;
    j["recommended"] = json::object();
    j["changes"] = json::object();
    for (std::size_t k = 0; k < spec.space.size(); ++k) {
        j["recommended"][spec.space[k].path] = value_of(s, o.recommended, k);
        if (changed(s, o.recommended, k)) j["changes"][spec.space[k].path] = value_of(s, o.recommended, k);
    }
    auto side = [&](const Candidate& c, auto mean, auto half) {
        json x{{"label", label(spec, c)}, {"values", json::object()}, {"paths", json::array()}};
        for (std::size_t k = 0; k < spec.space.size(); ++k) x["values"][spec.space[k].path] = value_of(s, c, k);
        for (std::size_t p = 0; p < o.paths.size(); ++p)
            x["paths"].push_back({{"path", p < s.paths.size() ? s.paths[p] : ""},
                                  {"mean", number(mean(o.paths[p]))},
                                  {"half_width_95", number(half(o.paths[p]))}});
        return x;
    };
    using PC = Outcome::PathComparison;
    j["baseline"] = side(
        o.baseline, [](const PC& c) { return c.base_mean; }, [](const PC& c) { return c.base_half; });
    j["best"] = side(
        o.best, [](const PC& c) { return c.best_mean; }, [](const PC& c) { return c.best_half; });
    j["paths"] = json::array();
    for (std::size_t p = 0; p < o.paths.size(); ++p) {
        const auto& c = o.paths[p];
        j["paths"].push_back({{"path", p < s.paths.size() ? s.paths[p] : ""},
                              {"baseline", number(c.base_mean)},
                              {"recommended", number(c.rec_mean)},
                              {"delta", number(c.delta)},
                              {"p_value", number(c.p_value)},
                              {"significant", c.significant},
                              {"better", c.better}});
    }
    j["contributions"] = json::array();
    for (const auto& c : o.contributions)
        j["contributions"].push_back(
            {{"key", spec.space[c.key].path}, {"value", value_of(s, o.recommended, c.key)}, {"loss", number(c.loss)}});
    j["stages"] = json::array();
    for (std::size_t i = 0; i < o.stages.size(); ++i) {
        const auto& st = o.stages[i];
        json cs = json::array();
        for (const auto& sc : st.scored) {
            json means = json::array();
            for (double m : sc.mean) means.push_back(number(m));
            cs.push_back({{"label", label(spec, sc.candidate)},
                          {"variant", variant_name(spec, sc.candidate)},
                          {"means", means},
                          {"score", number(sc.score)},
                          {"failed", sc.failed},
                          {"feasible", sc.feasible},
                          {"dropped", sc.dropped.empty() ? json(nullptr) : json(sc.dropped)},
                          {"recommended", sc.candidate == o.recommended}});
        }
        j["stages"].push_back({{"number", st.request.number},
                               {"run", i < s.runs.size() ? s.runs[i] : ""},
                               {"confirmation", st.request.confirmation},
                               {"duration_seconds", std::chrono::duration<double>(st.request.duration).count()},
                               {"repeats", st.request.repeats},
                               {"adaptive", st.request.adaptive},
                               {"seconds", st.seconds},
                               {"candidates", cs}});
    }
    j["seeded_by"] = o.seeded_by;
    j["notes"] = o.notes;
    j["runs"] = s.runs;
    return j;
}

std::string answer_page(const Outcome& o, const Subject& s) {
    namespace html = report::html;
    const auto& spec = *s.spec;
    html::Page page(fmt::format("wanlab tune: {} ({})", s.file, s.id));
    page.section("answer", "Recommendation");
    page.paragraph(o.beats_baseline ? "Recommended: " + label(spec, o.recommended)
                                    : "No change: no setting in this space beats the baseline.");
    if (o.beats_baseline && !(o.best == o.recommended))
        page.paragraph(fmt::format("The best found was {}; the recommendation is the cheapest within {:.0f}% of it.",
                                   label(spec, o.best), spec.tolerance * 100));
    report::detail::TextTable paths(
        {"path", "baseline", o.recommended.baseline() ? "best" : "recommended", "change", "Welch p", "verdict"},
        {false, true, true, true, true, false});
    for (std::size_t p = 0; p < o.paths.size() && p < s.paths.size(); ++p) {
        const auto& c = o.paths[p];
        paths.add({s.paths[p], with_half(s, c.base_mean, c.base_half), with_half(s, c.rec_mean, c.rec_half),
                   fmt::format("{:+.1f}%", c.delta * 100), fmt::format("{:.3f}", c.p_value),
                   c.significant ? (c.better ? "better" : "worse") : "not significant"});
    }
    if (!paths.empty()) page.table(paths);
    page.paragraph(fmt::format("Goal {} ({} is better); {:.0f} s measured of a {:.0f} s budget; runs {}.",
                               spec.goal.text(), spec.goal.higher_is_better ? "higher" : "lower", o.measured_seconds,
                               std::chrono::duration<double>(spec.budget).count(), fmt::join(s.runs, ", ")));
    if (!o.contributions.empty()) {
        std::vector<std::string> items;
        for (const auto& c : o.contributions)
            items.push_back(fmt::format("{} = {}: {:.1f}% lost when it alone is put back as written",
                                        spec.space[c.key].path, value_of(s, o.recommended, c.key), c.loss * 100));
        page.list(items);
    }
    if (!o.notes.empty()) page.list(o.notes);
    page.section("search", "The search");
    nlohmann::ordered_json values = nlohmann::ordered_json::array();
    std::vector<std::string> stages;
    for (const auto& st : o.stages) {
        auto stage = fmt::format("stage {}{}: {}", st.request.number, st.request.confirmation ? " (confirmation)" : "",
                                 units::format_duration(st.request.duration));
        stages.push_back(stage);
        for (const auto& sc : st.scored)
            values.push_back({{"stage", stage},
                              {"candidate", label(spec, sc.candidate)},
                              {"score", sc.score},
                              {"status", sc.candidate == o.recommended ? "recommended"
                                         : sc.dropped.empty()          ? "kept"
                                                                       : "dropped"},
                              {"why", sc.dropped}});
    }
    nlohmann::ordered_json chart = {
        {"data", {{"name", "search"}, {"values", values}}},
        {"facet",
         {{"row",
           {{"field", "stage"},
            {"type", "nominal"},
            {"sort", stages},
            {"title", nullptr},
            {"header", {{"labelAngle", 0}, {"labelOrient", "top"}, {"labelAlign", "left"}}}}}}},
        {"resolve", {{"scale", {{"y", "independent"}}}}},
        {"spec",
         {{"width", 420},
          {"mark", "bar"},
          {"encoding",
           {{"x",
             {{"field", "score"},
              {"type", "quantitative"},
              {"title", "score (the worst ratio to a path's best; 1 is the best)"}}},
            {"y", {{"field", "candidate"}, {"type", "nominal"}, {"sort", "-x"}, {"title", nullptr}}},
            {"color",
             {{"field", "status"},
              {"type", "nominal"},
              {"scale",
               {{"domain", {"recommended", "kept", "dropped"}}, {"range", {"#2e7d32", "#1f77b4", "#bdbdbd"}}}}}},
            {"tooltip",
             nlohmann::ordered_json::array(
                 {{{"field", "candidate"}}, {{"field", "score"}, {"format", ".3f"}}, {{"field", "why"}}})}}}}}};
    page.chart({"tune-search", "The search", chart},
               "Each stage's candidates by score, the recommendation green; a grey bar was dropped there (its "
               "reason in the tooltip and below).");
    std::vector<std::string> dropped;
    for (const auto& st : o.stages)
        for (const auto& sc : st.scored)
            if (!sc.dropped.empty())
                dropped.push_back(
                    fmt::format("stage {}: {}: {}", st.request.number, label(spec, sc.candidate), sc.dropped));
    if (!dropped.empty()) page.list(dropped);
    return page.document();
}

std::string sysctl_dropin(const Outcome& o, const Subject& s) {
    if (!o.beats_baseline) return "";
    const auto& spec = *s.spec;
    std::string body;
    for (std::size_t k = 0; k < spec.space.size(); ++k) {
        if (!changed(s, o.recommended, k)) continue;
        auto at = placement_of(spec.space[k].path);
        auto value = value_of(s, o.recommended, k);
        if (at.sysctl.empty()) {
            body += fmt::format("# {} = {}: the emulated path's own setting, not a sysctl of a machine\n",
                                spec.space[k].path, value);
            continue;
        }
        body += fmt::format("# {} (from {}): on {}", at.sysctl, spec.space[k].path, at.machine);
        if (auto why = reason(o, s, k); !why.empty()) body += "; " + why;
        body += "\n";
        if (at.sysctl == "net.ipv4.tcp_congestion_control" && value != "cubic" && value != "reno")
            body += fmt::format("# (needs the tcp_{} module: echo tcp_{} > /etc/modules-load.d/{}.conf)\n", value,
                                value, value);
        body += fmt::format("{} = {}\n", at.sysctl, plain_numbers(value));
    }
    if (body.empty()) return "";
    std::string head = fmt::format("# Written by wanlab tune {} from {}.\n", s.id, s.file);
    for (std::size_t p = 0; p < o.paths.size() && p < s.paths.size(); ++p)
        head += fmt::format("# {}: {} {} -> {} ({:+.1f}%, Welch p = {:.3f})\n", s.paths[p], spec.goal.text(),
                            with_half(s, o.paths[p].base_mean, o.paths[p].base_half),
                            with_half(s, o.paths[p].rec_mean, o.paths[p].rec_half), o.paths[p].delta * 100,
                            o.paths[p].p_value);
    return head + body;
}

std::string tuned_profile(const Outcome& o, const Subject& s) {
    auto dropin = sysctl_dropin(o, s);
    if (dropin.empty()) return "";
    std::string sysctl;
    std::string comments;
    for (std::size_t start = 0; start < dropin.size();) {
        auto end = dropin.find('\n', start);
        auto line = dropin.substr(start, end - start);
        start = end == std::string::npos ? dropin.size() : end + 1;
        if (line.starts_with("#"))
            comments += line + "\n";
        else if (!line.empty())
            sysctl += line + "\n";
    }
    return fmt::format("{}[main]\nsummary=wanlab tune {}: {}\n\n[sysctl]\n{}", comments, s.id,
                       label(*s.spec, o.recommended), sysctl);
}

}  // namespace wanlab::tune
