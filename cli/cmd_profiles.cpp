// `wanlab profiles [NAME] [--kind link|tuning] [--json]`: the named presets an experiment's
// `profile = "NAME"` (in [link] or [sysctl]) and `wanlab link apply --profile NAME` can
// start from, one line each with its description; with NAME, one profile in full: its file,
// the source of its numbers, and what it resolves to, loaded exactly as an experiment loads
// it (so a broken profile shows the same located errors). Reads files only.
#include <cstdio>
#include <filesystem>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/load.h"
#include "core/error.h"
#include "experiment/experiment.h"
#include "experiment/plan.h"
#include "experiment/profiles.h"

namespace wanlab::cli {
namespace {

namespace fs = std::filesystem;

struct ProfileOptions {
    std::string name;
    std::string kind;  // "" = both
    bool json = false;
};

struct KindInfo {
    const char* kind;
    const char* title;
};

constexpr KindInfo kKinds[] = {
    {"link", "Link profiles ([link] profile = \"NAME\", or wanlab link apply --profile NAME)"},
    {"tuning", "Tuning profiles ([sysctl] profile = \"NAME\")"},
};

std::vector<const KindInfo*> kinds_of(const ProfileOptions& o) {
    std::vector<const KindInfo*> out;
    for (const auto& k : kKinds)
        if (o.kind.empty() || o.kind == k.kind) out.push_back(&k);
    return out;
}

/// Where the entry comes from, when that is not the shipped folders.
std::string origin(const experiment::ProfileEntry& e, const experiment::ProfileLibrary& lib) {
    std::string where;
    if (!lib.dirs().empty() && e.dir == lib.dirs().front()) where = "user";
    if (!e.shadowed.empty()) where += where.empty() ? "overrides another" : ", overrides the shipped one";
    return where.empty() ? "" : fmt::format(" [{}]", where);
}

nlohmann::json entry_json(const experiment::ProfileEntry& e) {
    return {{"kind", e.kind},
            {"name", e.name},
            {"path", e.path},
            {"description", e.summary.description},
            {"source", e.summary.source},
            {"error", e.summary.error},
            {"shadowed", e.shadowed}};
}

int list(const ProfileOptions& o, const experiment::ProfileLibrary& lib) {
    nlohmann::json all = nlohmann::json::array();
    std::string text;
    for (const auto* k : kinds_of(o)) {
        auto entries = lib.list(k->kind);
        std::size_t width = 0;
        for (const auto& e : entries) width = std::max(width, e.name.size());
        text += fmt::format("{}:\n", k->title);
        if (entries.empty()) text += "  (none)\n";
        for (const auto& e : entries) {
            all.push_back(entry_json(e));
            const auto& line = e.summary.error.empty() ? e.summary.description : "error: " + e.summary.error;
            text += fmt::format("  {:<{}}  {}{}\n", e.name, width, line, origin(e, lib));
        }
        text += "\n";
    }
    if (o.json) {
        nlohmann::json dirs = nlohmann::json::array();
        for (const auto& d : lib.dirs()) dirs.push_back({{"path", d}, {"exists", fs::is_directory(d)}});
        std::puts(nlohmann::json{{"dirs", dirs}, {"profiles", all}}.dump(2).c_str());
        return 0;
    }
    text += "Searched in this order (the first file of a name wins):\n";
    for (std::size_t i = 0; i < lib.dirs().size(); ++i)
        text += fmt::format("  {}{}{}\n", lib.dirs()[i], i == 0 ? " (your own profiles)" : "",
                            fs::is_directory(lib.dirs()[i]) ? "" : " (missing)");
    text += "`wanlab profiles NAME` shows one in full.\n";
    std::fputs(text.c_str(), stdout);
    return 0;
}

/// The profile's resolved settings, loaded as an experiment naming it would be; the loader's
/// located messages go to stderr.
std::vector<std::string> resolved(const experiment::ProfileEntry& e, const experiment::ProfileLibrary& lib) {
    std::string text = fmt::format("[{}]\nprofile = {}\n", e.kind == "link" ? "link" : "sysctl", toml_value(e.name));
    config::Documents docs;
    Diagnostics diag;
    auto exp = experiment::load_experiment("profile", text, {}, lib, docs, diag);
    std::fputs(diag.render(docs.sources()).c_str(), stderr);
    if (!exp) throw InputError(fmt::format("{} profile \"{}\" has errors (shown above)", e.kind, e.name));
    const auto& t = exp->trials.front();
    if (e.kind == "link")
        return {"up (client -> server):   " + experiment::direction_summary(t.link.up),
                "down (server -> client): " + experiment::direction_summary(t.link.down)};
    std::vector<std::string> out;
    for (const auto& s : t.sysctl.global) out.push_back(fmt::format("{} = {}  (global)", s.key, s.value));
    if (auto it = t.sysctl.per_host.find("client"); it != t.sysctl.per_host.end())
        for (const auto& s : it->second) out.push_back(fmt::format("{} = {}", s.key, s.value));
    return out;
}

int show(const ProfileOptions& o, const experiment::ProfileLibrary& lib) {
    std::vector<experiment::ProfileEntry> found;
    std::vector<std::string> names;
    for (const auto* k : kinds_of(o))
        for (auto& e : lib.list(k->kind)) {
            names.push_back(e.name);
            if (e.name == o.name) found.push_back(std::move(e));
        }
    if (found.empty()) {
        auto guess = did_you_mean(o.name, names);
        throw InputError(fmt::format("no profile named \"{}\"{}; `wanlab profiles` lists them", o.name,
                                     guess.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", guess)));
    }
    nlohmann::json all = nlohmann::json::array();
    for (const auto& e : found) {
        auto lines = resolved(e, lib);
        if (o.json) {
            auto j = entry_json(e);
            j["resolved"] = lines;
            all.push_back(j);
            continue;
        }
        std::printf("%s profile %s (%s)\n  %s\n  source: %s\n", e.kind.c_str(), e.name.c_str(), e.path.c_str(),
                    e.summary.description.c_str(),
                    e.summary.source.empty() ? "(none given)" : e.summary.source.c_str());
        for (const auto& s : e.shadowed) std::printf("  (hides %s)\n", s.c_str());
        for (const auto& l : lines) std::printf("  %s\n", l.c_str());
    }
    if (o.json) std::puts(all.dump(2).c_str());
    return 0;
}

}  // namespace

Runner setup_profiles(CLI::App& sub) {
    auto o = std::make_shared<ProfileOptions>();
    sub.add_option("NAME", o->name, "Show this profile in full: file, source, resolved settings");
    sub.add_option("--kind", o->kind, "Only link or only tuning profiles")->check(CLI::IsMember({"link", "tuning"}));
    sub.add_flag("--json", o->json, "JSON");
    return [o] {
        auto lib = experiment::ProfileLibrary::standard();
        return o->name.empty() ? list(*o, lib) : show(*o, lib);
    };
}

}  // namespace wanlab::cli
