#include "experiment/experiment.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <unordered_set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "core/text.h"
#include "core/units.h"
#include "experiment/asserts.h"
#include "experiment/document.h"
#include "experiment/sections.h"
#include "experiment/timeouts.h"
#include "experiment/trials.h"
#include "probes/group.h"

namespace wanlab::experiment {
namespace {

using config::Node;
using config::Reader;

// Where the run happens is one place for all its trials: the mode, and in host mode the
// interface, target filter and line rate. (A namespace lab's mtu, offloads and queue
// length may vary: the lab is rebuilt for them.)
void check_one_place(const Node& doc, const Experiment& exp, Diagnostics& diag) {
    if (exp.trials.size() < 2) return;
    const auto& first = exp.trials.front().lab;
    for (const auto& t : exp.trials) {
        const auto& l = t.lab;
        std::string key = l.mode != first.mode                     ? "mode"
                          : first.mode == LabSpec::Mode::netns     ? ""
                          : l.dev != first.dev                     ? "dev"
                          : l.target != first.target               ? "target"
                          : l.port != first.port                   ? "port"
                          : l.line_rate_bps != first.line_rate_bps ? "line_rate"
                                                                   : "";
        if (key.empty()) continue;
        // Point at the sweep key or the variant's [lab] that makes the difference.
        Location at{exp.file};
        if (const Node* sweep = doc.find("sweep"))
            for (const auto& [k, v] : sweep->members)
                if (k == "lab." + key) at = v.key_at;
        if (at.line == 0)
            if (const Node* variants = doc.find("variant"))
                for (const auto& v : variants->items)
                    if (const Node* lab = v.find("lab"); lab && lab->find(key)) at = lab->find(key)->key_at;
        diag.error(at, fmt::format("[lab] {} differs between trials (trial {}, variant {}, against trial 1): a run "
                                   "happens in one place{}; run one experiment per value",
                                   key, t.index, t.variant,
                                   first.mode == LabSpec::Mode::host
                                       ? ", and host mode impairs one interface toward one target"
                                       : ""));
        return;
    }
}

std::vector<std::string> parse_variants(Node& doc, Diagnostics& diag) {
    std::vector<std::string> names;
    std::unordered_set<std::string> seen;  // a set: 10,000 names checked against a list was quadratic
    Node* variants = doc.find("variant");
    if (!variants) return names;
    if (variants->kind != Node::Kind::table_array) {
        diag.error(variants->key_at.line ? variants->key_at : variants->value_at,
                   "`variant` must be an array of tables, written [[variant]] with a `name` each");
        return names;
    }
    for (std::size_t i = 0; i < variants->items.size(); ++i) {
        const Node& v = variants->items[i];
        if (i == kMaxTrials) {  // each variant is a trial at least: the same cap as a sweep's
            diag.error(v.value_at, fmt::format("more than {} variants ({}): an experiment has at most {} trials",
                                               kMaxTrials, variants->items.size(), kMaxTrials));
            names.resize(1);  // the rest of the file is checked with the first, as a sweep's first point
            break;
        }
        Reader r(v, fmt::format("[[variant]] #{}", i + 1), diag);
        auto name = r.string("name");
        r.string("description");
        r.table("link");
        r.table("sysctl");
        r.table("probe");
        r.table("service");
        r.finish();
        if (!r.has("name")) {
            diag.error(v.value_at, fmt::format("[[variant]] #{} needs a `name`", i + 1));
            continue;
        }
        if (!name) continue;
        if (!text::valid_name(*name)) {
            diag.error(r.value_at("name"),
                       fmt::format("variant name \"{}\" must be 1-64 letters, digits, `-` or `_`", *name));
            continue;
        }
        if (!seen.insert(*name).second) {
            diag.error(r.value_at("name"), fmt::format("two variants are named \"{}\": names must be unique", *name));
            continue;
        }
        names.push_back(*name);
    }
    return names;
}

}  // namespace

std::optional<Experiment> load_experiment(const std::string& file, const std::string& text,
                                          const std::vector<std::string>& sets, const ProfileLibrary& profiles,
                                          config::Documents& docs, Diagnostics& diag,
                                          const std::vector<MadeVariant>* made) {
    const toml::table* parsed = docs.parse(file, text, diag);
    if (!parsed) return std::nullopt;
    Node doc = config::from_toml(*parsed);
    doc.value_at = Location{file, 0, 0, 0};
    normalize(doc, diag);
    std::vector<Node> overlays;
    for (std::size_t i = 0; i < sets.size(); ++i)
        if (auto overlay = parse_set(sets[i], i + 1, docs, diag)) {
            merge_document(doc, *overlay, diag);
            overlays.push_back(std::move(*overlay));
        }
    warn_sets_under_sweep(doc, overlays, diag);

    Experiment exp;
    exp.file = file;
    exp.sets = sets;
    Reader top(doc, "the experiment", diag);
    auto name = top.string("name");
    auto description = top.string("description");
    exp.run = parse_run(top.table("run"), diag);
    top.table("lab");
    top.table("hosts");
    top.table("link");
    top.table("sysctl");
    top.table_array("probe");
    top.table_array("service");
    const Node* sweep = top.table("sweep");
    top.raw("variant");
    const Node* asserts = top.table_array("assert");
    const Node* tune = top.table("tune");
    top.finish();
    exp.name = name ? *name : std::filesystem::path(file).stem().string();
    exp.description = description.value_or("");

    exp.variants = parse_variants(doc, diag);
    // tune makes its own variants, its candidates: the file's would be measured under each.
    if (tune && doc.find("variant"))
        diag.error(doc.find("variant")->key_at,
                   "a file with [tune] declares no [[variant]]: tune makes its own, one per candidate",
                   "move what the variants change into [tune.space], or tune a copy of the file without them");
    if (made) {
        exp.variants.clear();
        for (const auto& v : *made) exp.variants.push_back(v.name);
        exp.run.baseline = exp.variants.empty() ? "" : exp.variants.front();
    }
    bool implicit_variant = exp.variants.empty();
    if (implicit_variant) exp.variants.push_back("default");
    if (exp.run.baseline.empty()) {
        exp.run.baseline = exp.variants.front();
    } else if (std::find(exp.variants.begin(), exp.variants.end(), exp.run.baseline) == exp.variants.end()) {
        const Node* run = doc.find("run");
        auto guess = did_you_mean(exp.run.baseline, exp.variants);
        diag.error(run && run->find("baseline") ? run->find("baseline")->value_at : Location{file},
                   fmt::format("[run] baseline = \"{}\" names no variant{}", exp.run.baseline,
                               guess.empty() ? "" : fmt::format("; did you mean \"{}\"?", guess)));
    }

    auto points = sweep_points(sweep, exp, diag);
    // With a broken sweep, still check the rest of the file once, at the first point.
    if (diag.has_errors() && points.size() > 1) points.resize(1);
    if (points.empty()) points.emplace_back();
    exp.trials = expand_trials(doc, exp, points, implicit_variant, profiles, docs, diag, made);
    check_one_place(doc, exp, diag);
    warn_short_timeouts(exp, diag);
    // A group's own record is asserted like a probe's (its fairness, its summed throughput).
    if (!exp.trials.empty())
        parse_asserts(asserts, exp, probes::with_group_records(exp.trials.front().probes), diag, exp.asserts);
    if (tune && !exp.trials.empty()) exp.tune = parse_tune(*tune, exp, diag);
    // Every candidate of the space (each combination of its keys' values, at most
    // kMaxTuneCandidates) checked as a trial at the first point, so a value tune could not set
    // (`sysctl.net.ipv4.tcp_rmem = "4096 131072 65536"`) is refused here, at its value, and not
    // when tune reaches it. Identical messages are reported once.
    if (exp.tune && !made && !diag.has_errors()) {
        std::vector<MadeVariant> grid{{"c0", {}}};
        for (const auto& k : exp.tune->space) {
            std::vector<MadeVariant> next;
            for (const auto& g : grid)
                for (std::size_t i = 0; i < k.values.size(); ++i) {
                    auto v = g;
                    v.name = fmt::format("c{}", next.size());
                    v.values.push_back({k.path, k.values[i], k.value_at[i]});
                    next.push_back(std::move(v));
                }
            grid = std::move(next);
        }
        Experiment check = exp;
        check.variants.clear();
        for (const auto& v : grid) check.variants.push_back(v.name);
        (void)expand_trials(doc, check, {points.front()}, false, profiles, docs, diag, &grid);
    }
    if (diag.has_errors()) return std::nullopt;
    return exp;
}

}  // namespace wanlab::experiment
