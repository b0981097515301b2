#include "experiment/trials.h"

#include <algorithm>
#include <cstdint>
#include <optional>

#include <fmt/format.h>

#include "experiment/document.h"
#include "experiment/sections.h"
#include "netem/link_spec.h"

namespace wanlab::experiment {
namespace {

using config::Node;

const std::vector<std::string> kRoots{"link", "sysctl", "probe", "lab", "service"};
const std::vector<std::string> kHosts{"client", "router", "server", "host"};

std::vector<std::string> split(const std::string& path) {
    std::vector<std::string> out;
    std::string cur;
    for (char c : path) {
        if (c == '.') {
            out.push_back(cur);
            cur.clear();
        } else {
            cur += c;
        }
    }
    out.push_back(cur);
    return out;
}

std::string join(const std::vector<std::string>& parts, std::size_t from) {
    std::string out;
    for (std::size_t i = from; i < parts.size(); ++i) out += (out.empty() ? "" : ".") + parts[i];
    return out;
}

// The overlay that sets `path` to `value`: {link: {up: {delay: v}}}, {sysctl: {"net.core.x": v}},
// {probe: {bulk: {streams: v}}}. Intermediate tables carry the sweep key's location so an
// unknown name is reported at the sweep entry.
Node overlay_for(const std::string& path, const Node& value) {
    auto parts = split(path);
    std::vector<std::string> keys;
    if (parts[0] == "sysctl") {
        keys.push_back("sysctl");
        std::size_t from = 1;
        if (parts.size() > 2 && std::find(kHosts.begin(), kHosts.end(), parts[1]) != kHosts.end()) {
            keys.push_back(parts[1]);
            from = 2;
        }
        keys.push_back(join(parts, from));
    } else {
        keys = parts;
    }
    Node leaf = value;
    for (std::size_t i = keys.size(); i-- > 1;) {
        Node table;
        table.kind = Node::Kind::table;
        table.key_at = value.key_at;
        table.value_at = value.key_at;
        table.members.emplace_back(keys[i], std::move(leaf));
        leaf = std::move(table);
    }
    Node root;
    root.kind = Node::Kind::table;
    root.members.emplace_back(keys[0], std::move(leaf));
    return root;
}

std::uint64_t fnv1a(const std::string& s) {
    std::uint64_t h = 1469598103934665603ull;
    for (unsigned char c : s) {
        h ^= c;
        h *= 1099511628211ull;
    }
    return h;
}

}  // namespace

bool check_key_path(const std::string& path, const Node& entry, const char* section, Diagnostics& diag) {
    auto parts = split(path);
    if (std::find(kRoots.begin(), kRoots.end(), parts[0]) == kRoots.end()) {
        auto guess = did_you_mean(parts[0], kRoots);
        diag.error(entry.key_at,
                   fmt::format(
                       "{} key `{}` must start with link., sysctl., probe., service. or lab.{}", section, path,
                       guess.empty() ? "" : fmt::format("; did you mean `{}`?", guess + path.substr(parts[0].size()))));
        return false;
    }
    if (parts.size() < 2 || std::any_of(parts.begin(), parts.end(), [](const std::string& p) { return p.empty(); })) {
        diag.error(entry.key_at, fmt::format("{} key `{}` must name a setting, such as `link.rtt`", section, path));
        return false;
    }
    if (parts[0] == "probe" && parts.size() != 3) {
        diag.error(entry.key_at,
                   fmt::format("{} key `{}` must be probe.NAME.OPTION, such as `probe.bulk.streams`", section, path));
        return false;
    }
    if (parts[0] == "service" && parts.size() < 3) {
        diag.error(entry.key_at, fmt::format("{} key `{}` must be service.NAME.KEY, such as "
                                             "`service.web.vars.nodelay`",
                                             section, path));
        return false;
    }
    return true;
}

std::string value_text(const Node& leaf) {
    if (leaf.kind != Node::Kind::value) return "{...}";
    const toml::node& v = *leaf.value;
    if (auto s = v.value_exact<std::string>()) return *s;
    if (auto b = v.value_exact<bool>()) return *b ? "true" : "false";
    if (auto i = v.value_exact<std::int64_t>()) return std::to_string(*i);
    if (auto f = v.value_exact<double>()) return fmt::format("{}", *f);
    if (const auto* a = v.as_array()) {
        std::string out;
        for (std::size_t i = 0; i < a->size(); ++i) out += (i ? ", " : "") + value_text(config::element(leaf, i));
        return "[" + out + "]";
    }
    return "?";
}

const char* sweep_mode_name(SweepMode mode) noexcept { return mode == SweepMode::zip ? "zip" : "cross"; }

namespace {

// A [sweep] key's values: a list, or a table of named values in file order.
std::size_t value_count(const Node& axis) {
    return axis.kind == Node::Kind::table ? axis.members.size() : axis.value->as_array()->size();
}

Node value_at(const Node& axis, std::size_t i) {
    return axis.kind == Node::Kind::table ? axis.members[i].second : config::element(axis, i);
}

std::string name_at(const Node& axis, std::size_t i) {
    return axis.kind == Node::Kind::table ? axis.members[i].first : "";
}

}  // namespace

std::vector<SweepPoint> sweep_points(const Node* sweep, Experiment& exp, Diagnostics& diag) {
    exp.sweep_mode = SweepMode::cross;
    if (!sweep) return {SweepPoint{}};
    config::Reader r(*sweep, "[sweep]", diag);
    if (auto m = r.choice("mode", {"cross", "zip"})) exp.sweep_mode = *m == "zip" ? SweepMode::zip : SweepMode::cross;
    std::vector<std::pair<std::string, const Node*>> lists;
    for (const auto& [path, value] : sweep->members) {
        if (path == "mode") continue;
        r.raw(path);
        if (!check_key_path(path, value, "[sweep]", diag)) continue;
        const bool named = value.kind == Node::Kind::table;
        if (!named && (value.kind != Node::Kind::value || !value.value->is_array())) {
            diag.error(value.value_at,
                       fmt::format("[sweep] `{}` must be a list of values, such as [\"20ms\", \"40ms\"], or a table "
                                   "of named values, such as {{ near = \"20ms\", far = \"80ms\" }}",
                                   path));
            continue;
        }
        lists.emplace_back(path, &value);
        exp.sweep_keys.push_back(path);
    }
    r.finish();
    if (diag.has_errors()) return {};
    // Lists that cannot take part (empty, or of the wrong length for zip) are reported and
    // left out, so the remaining ones are still checked against the experiment.
    std::vector<std::pair<std::string, const Node*>> usable;
    std::vector<std::string> points_first_only;
    std::size_t count = 1;
    for (const auto& [path, list] : lists) {
        std::size_t n = value_count(*list);
        if (n == 0) {
            diag.error(list->value_at,
                       fmt::format("[sweep] `{}` is an empty list: the sweep would have no trials", path));
            continue;
        }
        if (exp.sweep_mode == SweepMode::zip && !usable.empty() && n != count) {
            diag.error(list->value_at,
                       fmt::format("[sweep] mode = \"zip\" needs lists of one length: `{}` has {} values, `{}` has {}",
                                   path, n, usable.front().first, count));
            continue;
        }
        usable.emplace_back(path, list);
        count = exp.sweep_mode == SweepMode::zip ? n : std::min<std::size_t>(count * n, kMaxTrials + 1);
    }
    lists = std::move(usable);
    std::size_t total = count * exp.variants.size();
    if (total > kMaxTrials) {
        diag.error(sweep->key_at.line ? sweep->key_at : sweep->value_at,
                   fmt::format("the sweep makes more than {} trials ({} sweep points x {} variants): narrow it or use "
                               "mode = \"zip\"",
                               kMaxTrials, count > kMaxTrials ? std::string("over 10000") : std::to_string(count),
                               exp.variants.size()));
        count = 1;  // check the first point only
        for (auto& l : lists) points_first_only.push_back(l.first);
    }
    std::vector<SweepPoint> points(count);
    for (std::size_t p = 0; p < count; ++p) {
        std::size_t rest = p;
        // Cross product: the first key varies slowest, like nested loops written in file order.
        std::size_t stride = count;
        for (const auto& [path, list] : lists) {
            std::size_t n = value_count(*list);
            std::size_t i;
            if (!points_first_only.empty()) {
                i = 0;
            } else if (exp.sweep_mode == SweepMode::zip) {
                i = p;
            } else {
                stride /= n;
                i = rest / stride;
                rest %= stride;
            }
            points[p].values.emplace_back(path, value_at(*list, i));
            points[p].names.push_back(name_at(*list, i));
        }
    }
    return points;
}

std::vector<Trial> expand_trials(const Node& doc, const Experiment& exp, const std::vector<SweepPoint>& points,
                                 bool implicit_variant, const ProfileLibrary& profiles, config::Documents& docs,
                                 Diagnostics& diag, const std::vector<MadeVariant>* made) {
    Node base = doc;
    // One overlay per declared variant that has a valid, unique name (the others were
    // reported by the variant parser and are left out).
    std::vector<Node> variant_overlays;
    std::vector<std::string> variant_names;
    if (made) {
        for (const auto& v : *made) {
            Node overlay;
            for (const auto& value : v.values) {
                const toml::table* t =
                    docs.parse(fmt::format("{} ({} of variant {})", value.at.file, value.path, v.name),
                               "v = " + value.toml + "\n", diag);
                if (!t) continue;
                Node leaf;
                leaf.kind = Node::Kind::value;
                leaf.value = t->get("v");
                leaf.key_at = leaf.value_at = value.at;
                config::merge(overlay, overlay_for(value.path, leaf));
            }
            variant_overlays.push_back(std::move(overlay));
            variant_names.push_back(v.name);
        }
    } else if (!implicit_variant) {
        for (const auto& v : doc.find("variant")->items) {
            const Node* name = v.find("name");
            auto text =
                name && name->kind == Node::Kind::value ? name->value->value_exact<std::string>() : std::nullopt;
            if (!text || std::find(exp.variants.begin(), exp.variants.end(), *text) == exp.variants.end() ||
                std::find(variant_names.begin(), variant_names.end(), *text) != variant_names.end())
                continue;
            Node overlay = v;
            overlay.members.erase(
                std::remove_if(overlay.members.begin(), overlay.members.end(),
                               [](const auto& m) { return m.first == "name" || m.first == "description"; }),
                overlay.members.end());
            variant_overlays.push_back(std::move(overlay));
            variant_names.push_back(*text);
        }
    } else {
        variant_overlays.emplace_back();
        variant_names.push_back(exp.variants.front());
    }
    // [sysctl] is read once when no variant or sweep point changes it or what it depends on
    // ([lab], [hosts]): thousands of keys times hundreds of points stay linear (issue 40).
    auto changes_sysctl = [](std::string_view key) {
        return key == "sysctl" || key == "lab" || key == "hosts" || key.starts_with("sysctl.") ||
               key.starts_with("lab.") || key.starts_with("hosts.");
    };
    std::vector<bool> variant_keeps(variant_overlays.size());
    for (std::size_t v = 0; v < variant_overlays.size(); ++v)
        variant_keeps[v] = std::none_of(variant_overlays[v].members.begin(), variant_overlays[v].members.end(),
                                        [&](const auto& m) { return changes_sysctl(m.first); });
    Node base_without_sysctl = base;
    std::erase_if(base_without_sysctl.members, [](const auto& m) { return m.first == "sysctl"; });
    std::optional<sysctl::SysctlSpec> shared_sysctl;
    netem::TraceCache traces;  // each trace file read once, whatever number of trials follow it
    std::vector<Trial> trials;
    trials.reserve(points.size() * variant_overlays.size());
    for (const auto& point : points) {
        const bool point_keeps = std::none_of(point.values.begin(), point.values.end(),
                                              [&](const auto& pv) { return changes_sysctl(pv.first); });
        for (std::size_t v = 0; v < variant_overlays.size(); ++v) {
            const bool shared = point_keeps && variant_keeps[v] && shared_sysctl;
            // Base, then the variant, then the sweep point: a swept key takes the swept value
            // in every variant.
            Node trial_doc = shared ? base_without_sysctl : base;
            merge_document(trial_doc, variant_overlays[v], diag);
            for (const auto& [path, value] : point.values) merge_document(trial_doc, overlay_for(path, value), diag);
            Trial t = parse_trial(trial_doc, exp.run, exp.file, profiles, docs, diag,
                                  shared ? &*shared_sysctl : nullptr, &traces);
            if (point_keeps && variant_keeps[v] && !shared_sysctl) shared_sysctl = t.sysctl;
            t.index = trials.size() + 1;
            t.variant = variant_names[v];
            std::string canonical = t.variant;
            for (std::size_t i = 0; i < point.values.size(); ++i) {
                const auto& [path, value] = point.values[i];
                const auto& name = i < point.names.size() ? point.names[i] : std::string();
                t.sweep.emplace_back(path, name.empty() ? value_text(value) : name);
                canonical += "|" + path + "=" + t.sweep.back().second;
            }
            t.id = fmt::format("{:08x}", static_cast<std::uint32_t>(fnv1a(canonical) >> 32));
            // [run] seed seeds netem wherever [link] names no seed of its own.
            if (!t.link.up.netem.seed) t.link.up.netem.seed = netem::seed_for(exp.run.seed, t.id, "up");
            if (!t.link.down.netem.seed) t.link.down.netem.seed = netem::seed_for(exp.run.seed, t.id, "down");
            trials.push_back(std::move(t));
            if (diag.error_count() > 50) return trials;  // enough to act on
        }
    }
    return trials;
}

}  // namespace wanlab::experiment
