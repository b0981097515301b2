// SysctlSnapshot: writes sysctls and gives the old values back.
//
// Creates: new values in /proc/sys (through a ProcSys). Undoes: writes back, in reverse
// order, the exact text each key held before wanlab first touched it (read just before that
// first write), in its destructor or on an explicit restore(). A key in a namespace that no
// longer exists is skipped: its values went with it. The destructor never throws; it reports
// failures on stderr and through on_failure. Move-only; not thread-safe.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "sysctl/proc_sys.h"

namespace wanlab::sysctl {

class SysctlSnapshot {
public:
    /// Called with the exact old value before a key is first changed (the journal's hook);
    /// if it throws, nothing is written.
    using BeforeChange = std::function<void(const std::string& ns, const std::string& key, const std::string& old)>;

    explicit SysctlSnapshot(ProcSys& proc, BeforeChange before = {}, std::function<void()> on_failure = {});
    ~SysctlSnapshot();
    SysctlSnapshot(SysctlSnapshot&&) noexcept;
    SysctlSnapshot& operator=(SysctlSnapshot&&) = delete;
    SysctlSnapshot(const SysctlSnapshot&) = delete;
    SysctlSnapshot& operator=(const SysctlSnapshot&) = delete;

    /// Writes `value`, recording the key's current value first if this is its first change.
    /// Throws wanlab::Error when the key does not exist or the kernel refuses the value.
    void set(const std::string& ns, const std::string& key, const std::string& value);

    /// Writes every recorded value back, newest first, and forgets them. Throws wanlab::Error
    /// listing the keys that could not be restored (the others are restored regardless).
    void restore();

    struct Saved {
        std::string ns, key, old;
    };
    /// What will be restored, oldest first.
    const std::vector<Saved>& saved() const { return saved_; }

private:
    ProcSys* proc_;
    BeforeChange before_;
    std::function<void()> on_failure_;
    std::vector<Saved> saved_;
};

}  // namespace wanlab::sysctl
