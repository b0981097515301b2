#include "experiment/profiles.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "core/shipped.h"

namespace wanlab::experiment {

namespace fs = std::filesystem;

namespace {

std::string trim(const std::string& s) {
    auto b = s.find_first_not_of(" \t\r");
    if (b == std::string::npos) return "";
    return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

std::string first_comment_line(const std::string& text) {
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
        auto t = trim(line);
        if (t.starts_with('#') && !trim(t.substr(1)).empty()) return trim(t.substr(1));
    }
    return "";
}

}  // namespace

ProfileSummary summarize_profile(const std::string& text) {
    ProfileSummary s;
    try {
        auto doc = toml::parse(text);
        s.description = doc["description"].value_or(std::string());
        s.source = doc["source"].value_or(std::string());
    } catch (const toml::parse_error& e) {
        s.error = fmt::format("invalid TOML at line {}: {}", e.source().begin.line, e.description());
        return s;
    }
    if (s.description.empty()) s.description = first_comment_line(text);
    return s;
}

ProfileLibrary ProfileLibrary::standard() {
    std::vector<std::string> dirs;
    if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg && *xdg)
        dirs.push_back(std::string(xdg) + "/wanlab/profiles");
    else if (const char* home = std::getenv("HOME"); home && *home)
        dirs.push_back(std::string(home) + "/.config/wanlab/profiles");
    if (const char* extra = std::getenv("WANLAB_PROFILES"); extra && *extra) dirs.emplace_back(extra);
    for (auto& d : shipped::dirs("profiles")) dirs.push_back(std::move(d));
    return ProfileLibrary(std::move(dirs));
}

std::optional<std::string> ProfileLibrary::find(const std::string& kind, const std::string& name) const {
    if (name.empty() || name.find('/') != std::string::npos || name.starts_with('.')) return std::nullopt;
    for (const auto& d : dirs_) {
        fs::path p = fs::path(d) / kind / (name + ".toml");
        std::error_code ec;
        if (fs::is_regular_file(p, ec)) return p.string();
    }
    return std::nullopt;
}

std::vector<std::string> ProfileLibrary::names(const std::string& kind) const {
    std::vector<std::string> out;
    for (const auto& d : dirs_) {
        std::error_code ec;
        for (fs::directory_iterator it(fs::path(d) / kind, ec), end; !ec && it != end; it.increment(ec)) {
            if (it->path().extension() != ".toml") continue;
            auto stem = it->path().stem().string();
            if (std::find(out.begin(), out.end(), stem) == out.end()) out.push_back(stem);
        }
    }
    std::sort(out.begin(), out.end());
    return out;
}

std::vector<ProfileEntry> ProfileLibrary::list(const std::string& kind) const {
    std::vector<ProfileEntry> out;
    for (const auto& name : names(kind)) {
        ProfileEntry e{kind, name, "", "", {}, {}};
        for (const auto& d : dirs_) {
            fs::path p = fs::path(d) / kind / (name + ".toml");
            std::error_code ec;
            if (!fs::is_regular_file(p, ec) || p.string() == e.path) continue;
            if (e.path.empty()) {
                e.path = p.string();
                e.dir = d;
            } else if (std::find(e.shadowed.begin(), e.shadowed.end(), p.string()) == e.shadowed.end()) {
                e.shadowed.push_back(p.string());
            }
        }
        std::ifstream in(e.path);
        std::stringstream text;
        text << in.rdbuf();
        e.summary = in ? summarize_profile(text.str()) : ProfileSummary{"", "", "cannot read " + e.path};
        out.push_back(std::move(e));
    }
    return out;
}

}  // namespace wanlab::experiment
