// SysctlSnapshot: writes sysctls and gives the old values back.
//
// Creates: new values in /proc/sys (through a ProcSys). Undoes: writes back, in reverse
// order, the exact text each key held before wanlab first touched it (read just before that
// first write), in its destructor or on an explicit restore(), but only while the key still
// holds what wanlab last wrote: a value someone else set during the run is theirs, and stays
// (with a note saying so). A key in a namespace that no longer exists is skipped: its values
// went with it. The destructor never throws; it reports failures on stderr and through
// on_failure. Move-only; not thread-safe.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "sysctl/proc_sys.h"

namespace wanlab::sysctl {

class SysctlSnapshot {
public:
    /// Called before every write (the journal's hook) with the value about to be written and,
    /// on a key's first change, the exact old value (nullptr after that); if it throws,
    /// nothing is written.
    using BeforeChange = std::function<void(const std::string& ns, const std::string& key, const std::string* old,
                                            const std::string& value)>;

    explicit SysctlSnapshot(ProcSys& proc, BeforeChange before = {}, std::function<void()> on_failure = {});
    ~SysctlSnapshot();
    SysctlSnapshot(SysctlSnapshot&&) noexcept;
    SysctlSnapshot& operator=(SysctlSnapshot&&) = delete;
    SysctlSnapshot(const SysctlSnapshot&) = delete;
    SysctlSnapshot& operator=(const SysctlSnapshot&) = delete;

    /// Writes `value`, recording the key's current value first if this is its first change.
    /// Throws wanlab::Error when the key does not exist or the kernel refuses the value.
    void set(const std::string& ns, const std::string& key, const std::string& value);

    /// Writes every recorded value back, newest first, and forgets them; returns one note per
    /// key left alone because its value changed under wanlab. Throws wanlab::Error listing the
    /// keys that could not be restored (the others are restored regardless).
    std::vector<std::string> restore();

    struct Saved {
        std::string ns, key, old;
        std::string wrote;  ///< what wanlab wrote last
    };
    /// What will be restored, oldest first.
    const std::vector<Saved>& saved() const { return saved_; }

private:
    ProcSys* proc_;
    BeforeChange before_;
    std::function<void()> on_failure_;
    std::vector<Saved> saved_;
};

/// Whether two /proc/sys texts are the same value: the kernel reads a triplet back with tabs
/// however it was written ("4096 131072 6291456" is "4096\t131072\t6291456").
bool same_value(const std::string& a, const std::string& b);

/// What give_back() did with a key.
struct GiveBack {
    bool restored = false;  ///< `old` was written back
    /// Else, when someone else's value stays: "net.core.rmem_max on the host was changed
    /// during the run (now "1", wanlab wrote "2"): left as it is, not restored to "3"".
    std::string left_alone;
};

/// The one rule for giving a key back, for a run's own restore and for `wanlab restore`:
/// writes `old` while the key still holds `wrote`, what wanlab wrote last ("" when it is not
/// known, as in a journal from before wanlab recorded it: then whatever it holds). Nothing to
/// do when the namespace is gone, the key missing or already `old`; any other value is
/// someone else's and stays. Throws wanlab::Error when the read or write fails.
GiveBack give_back(ProcSys& proc, const std::string& ns, const std::string& key, const std::string& old,
                   const std::string& wrote);

}  // namespace wanlab::sysctl
