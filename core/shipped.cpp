#include "core/shipped.h"

#include <algorithm>
#include <filesystem>

namespace wanlab::shipped {
namespace fs = std::filesystem;

namespace {

// Whether this program is a binary of the build tree it was configured in.
bool in_build_tree(const fs::path& exe) {
    std::error_code ec;
    auto build = fs::weakly_canonical(WANLAB_BUILD_DIR, ec);
    if (ec || build.empty()) return false;
    auto rel = exe.lexically_relative(build);
    return !rel.empty() && *rel.begin() != "..";
}

}  // namespace

std::vector<std::string> dirs(std::string_view what) {
    std::vector<std::string> out;
    auto add = [&out](const fs::path& p) {
        if (std::find(out.begin(), out.end(), p.string()) == out.end()) out.push_back(p.string());
    };
    std::error_code ec;
    auto exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        if (in_build_tree(exe)) add(fs::path(WANLAB_SOURCE_DIR) / what);
        if (exe.parent_path().filename() == "bin") add(exe.parent_path().parent_path() / "share" / "wanlab" / what);
    }
    add(fs::path(WANLAB_INSTALLED_DATADIR) / what);
    return out;
}

}  // namespace wanlab::shipped
