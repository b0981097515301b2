#include "sysctl/snapshot.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <sstream>

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

bool same_value(const std::string& a, const std::string& b) {
    std::istringstream x(a), y(b);
    std::string u, v;
    for (;;) {
        bool more_x = static_cast<bool>(x >> u), more_y = static_cast<bool>(y >> v);
        if (more_x != more_y) return false;
        if (!more_x) return true;
        if (u != v) return false;
    }
}

GiveBack give_back(ProcSys& proc, const std::string& ns, const std::string& key, const std::string& old,
                   const std::string& wrote) {
    GiveBack out;
    if (!proc.namespace_exists(ns)) return out;
    auto now = proc.read(ns, key);
    if (!now || same_value(*now, old)) return out;
    if (!wrote.empty() && !same_value(*now, wrote)) {
        out.left_alone = fmt::format(
            "{} {} was changed during the run (now \"{}\", wanlab wrote \"{}\"): left as it "
            "is, not restored to \"{}\"",
            key, where(ns), *now, wrote, old);
        return out;
    }
    proc.write(ns, key, old);
    out.restored = true;
    return out;
}

SysctlSnapshot::~SysctlSnapshot() {
    try {
        for (const auto& note : restore()) std::fputs(fmt::format("wanlab: warning: {}\n", note).c_str(), stderr);
    } catch (const std::exception& e) {
        std::fputs(fmt::format("wanlab: warning: {}\n", e.what()).c_str(), stderr);
        if (on_failure_) on_failure_();
    }
}

void SysctlSnapshot::set(const std::string& ns, const std::string& key, const std::string& value) {
    auto known = std::find_if(saved_.begin(), saved_.end(), [&](const Saved& s) { return s.ns == ns && s.key == key; });
    if (known == saved_.end()) {
        auto old = proc_->read(ns, key);
        if (!old) throw Error(fmt::format("setting {} {}: no such key", key, where(ns)));
        if (before_) before_(ns, key, &*old, value);
        saved_.push_back({ns, key, *old, value});
    } else {
        if (before_) before_(ns, key, nullptr, value);
        known->wrote = value;
    }
    proc_->write(ns, key, value);
}

std::vector<std::string> SysctlSnapshot::restore() {
    std::string failures;
    std::vector<std::string> notes;
    while (!saved_.empty()) {
        Saved s = std::move(saved_.back());
        saved_.pop_back();
        try {
            if (auto g = give_back(*proc_, s.ns, s.key, s.old, s.wrote); !g.left_alone.empty())
                notes.push_back(std::move(g.left_alone));
        } catch (const std::exception& e) {
            failures += fmt::format("\n  {}", e.what());
        }
    }
    if (!failures.empty()) throw Error("restoring sysctls failed:" + failures);
    return notes;
}

}  // namespace wanlab::sysctl
