#include "run/trial_files.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "core/sys.h"
#include "diagnosis/capture.h"

namespace wanlab::run {

std::filesystem::path trial_dir(const std::filesystem::path& files_dir, const std::string& run,
                                const experiment::Trial& t) {
    return files_dir / run / fmt::format("trial-{}-{}", t.index, t.id);
}

bool writes_files(const experiment::Trial& t) {
    return !t.services.empty() || std::any_of(t.probes.begin(), t.probes.end(),
                                              [](const auto& p) { return diagnosis::capture_bounds(p).has_value(); });
}

StageDir::StageDir() : path_(sys::make_service_dir("wanlab-trials", "the services")) {}

StageDir::~StageDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
}

void move_folder(const std::filesystem::path& from, const std::filesystem::path& to) {
    if (from == to || !std::filesystem::exists(from)) return;
    std::error_code ec;
    std::filesystem::create_directories(to, ec);
    std::filesystem::copy(
        from, to, std::filesystem::copy_options::recursive | std::filesystem::copy_options::overwrite_existing, ec);
    if (ec) throw Error(fmt::format("copying the trial folder {} to {}: {}", from.string(), to.string(), ec.message()));
    std::filesystem::remove_all(from, ec);
}

}  // namespace wanlab::run
