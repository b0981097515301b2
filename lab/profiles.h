// Named presets: link profiles (profiles/link/NAME.toml, a [link] table) and tuning
// profiles (profiles/tuning/NAME.toml, a [sysctl] table), each with a `description` and the
// `source` of its numbers.
//
// Contract: a ProfileLibrary searches its folders in order, the user's first
// ($XDG_CONFIG_HOME/wanlab/profiles, else ~/.config/wanlab/profiles), then $WANLAB_PROFILES,
// then the source tree's and the installed profiles/. find() only locates files; loading and
// validation happen where the profile is used, so errors point into the profile file.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace wanlab::lab {

class ProfileLibrary {
public:
    /// The default search path described above.
    static ProfileLibrary standard();
    explicit ProfileLibrary(std::vector<std::string> dirs) : dirs_(std::move(dirs)) {}

    /// The file for `kind` ("link" or "tuning") and `name`, if any folder has it.
    std::optional<std::string> find(const std::string& kind, const std::string& name) const;
    /// Every profile name of `kind`, first occurrence wins, sorted.
    std::vector<std::string> names(const std::string& kind) const;
    const std::vector<std::string>& dirs() const { return dirs_; }

private:
    std::vector<std::string> dirs_;
};

}  // namespace wanlab::lab
