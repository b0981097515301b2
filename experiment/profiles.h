// Named presets: link profiles (profiles/link/NAME.toml, a [link] table) and tuning
// profiles (profiles/tuning/NAME.toml, a [sysctl] table), each with a `description` and the
// `source` of its numbers.
//
// Contract: a ProfileLibrary searches its folders in order, the user's first
// ($XDG_CONFIG_HOME/wanlab/profiles, else ~/.config/wanlab/profiles), then $WANLAB_PROFILES,
// then the source tree's and the installed profiles/. find() only locates files; loading and
// validation happen where the profile is used, so errors point into the profile file.
// list() and summarize_profile() read only what `wanlab profiles` shows: description and source.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace wanlab::experiment {

/// What a profile file says about itself.
struct ProfileSummary {
    std::string description;  ///< the `description` key, else the first comment line, else ""
    std::string source;       ///< the `source` key, else ""
    std::string error;        ///< why the text is not TOML (then the fields above are ""), or ""
};

/// The summary of a profile's text. Pure; never throws.
ProfileSummary summarize_profile(const std::string& text);

/// One profile as `wanlab profiles` lists it.
struct ProfileEntry {
    std::string kind;  ///< "link" or "tuning"
    std::string name;
    std::string path;                   ///< the file find() picks: the first folder that has the name
    std::string dir;                    ///< the search folder it is in
    std::vector<std::string> shadowed;  ///< files of the same name in later folders, unused
    ProfileSummary summary;
};

class ProfileLibrary {
public:
    /// The default search path described above.
    static ProfileLibrary standard();
    explicit ProfileLibrary(std::vector<std::string> dirs) : dirs_(std::move(dirs)) {}

    /// The file for `kind` ("link" or "tuning") and `name`, if any folder has it.
    std::optional<std::string> find(const std::string& kind, const std::string& name) const;
    /// Every profile name of `kind`, first occurrence wins, sorted.
    std::vector<std::string> names(const std::string& kind) const;
    /// Every profile of `kind`, sorted by name, each read and summarized.
    std::vector<ProfileEntry> list(const std::string& kind) const;
    const std::vector<std::string>& dirs() const { return dirs_; }

private:
    std::vector<std::string> dirs_;
};

}  // namespace wanlab::experiment
