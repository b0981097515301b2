#include "sysctl/snapshot.h"

#include <algorithm>
#include <cstdio>
#include <exception>

#include <fmt/format.h>

#include "core/error.h"

namespace wanlab::sysctl {

SysctlSnapshot::SysctlSnapshot(ProcSys& proc, BeforeChange before, std::function<void()> on_failure)
    : proc_(&proc), before_(std::move(before)), on_failure_(std::move(on_failure)) {}

SysctlSnapshot::SysctlSnapshot(SysctlSnapshot&& o) noexcept
    : proc_(o.proc_), before_(std::move(o.before_)), on_failure_(std::move(o.on_failure_)),
      saved_(std::move(o.saved_)) {
    o.saved_.clear();
}

SysctlSnapshot::~SysctlSnapshot() {
    try {
        restore();
    } catch (const std::exception& e) {
        std::fputs(fmt::format("wanlab: warning: {}\n", e.what()).c_str(), stderr);
        if (on_failure_) on_failure_();
    }
}

void SysctlSnapshot::set(const std::string& ns, const std::string& key, const std::string& value) {
    bool known = std::any_of(saved_.begin(), saved_.end(), [&](const Saved& s) { return s.ns == ns && s.key == key; });
    if (!known) {
        auto old = proc_->read(ns, key);
        if (!old) throw Error(fmt::format("setting {} {}: no such key", key, where(ns)));
        if (before_) before_(ns, key, *old);
        saved_.push_back({ns, key, *old});
    }
    proc_->write(ns, key, value);
}

void SysctlSnapshot::restore() {
    std::string failures;
    while (!saved_.empty()) {
        Saved s = std::move(saved_.back());
        saved_.pop_back();
        try {
            if (proc_->namespace_exists(s.ns)) proc_->write(s.ns, s.key, s.old);
        } catch (const std::exception& e) {
            failures += fmt::format("\n  {}", e.what());
        }
    }
    if (!failures.empty()) throw Error("restoring sysctls failed:" + failures);
}

}  // namespace wanlab::sysctl
