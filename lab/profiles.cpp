#include "lab/profiles.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

namespace wanlab::lab {

namespace fs = std::filesystem;

ProfileLibrary ProfileLibrary::standard() {
    std::vector<std::string> dirs;
    if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg && *xdg)
        dirs.push_back(std::string(xdg) + "/wanlab/profiles");
    else if (const char* home = std::getenv("HOME"); home && *home)
        dirs.push_back(std::string(home) + "/.config/wanlab/profiles");
    if (const char* extra = std::getenv("WANLAB_PROFILES"); extra && *extra) dirs.emplace_back(extra);
    dirs.emplace_back(WANLAB_SOURCE_PROFILES);
    dirs.emplace_back(WANLAB_INSTALLED_PROFILES);
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

}  // namespace wanlab::lab
