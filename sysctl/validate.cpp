#include "sysctl/validate.h"

#include <sys/utsname.h>
#include <algorithm>
#include <charconv>
#include <climits>
#include <fstream>

#include <fmt/format.h>

#include "core/error.h"

namespace wanlab::sysctl {
namespace {

constexpr const char* kCongestion = "net.ipv4.tcp_congestion_control";
constexpr const char* kAvailable = "net.ipv4.tcp_available_congestion_control";
constexpr const char* kAllowed = "net.ipv4.tcp_allowed_congestion_control";

std::string join(const std::vector<std::string>& v) {
    std::string out;
    for (const auto& w : v) out += (out.empty() ? "" : " ") + w;
    return out;
}

bool contains(const std::vector<std::string>& v, const std::string& w) {
    return std::find(v.begin(), v.end(), w) != v.end();
}

std::optional<long long> integer(const std::string& w) {
    long long v = 0;
    auto [end, ec] = std::from_chars(w.data(), w.data() + w.size(), v);
    if (ec != std::errc{} || end != w.data() + w.size()) return std::nullopt;
    return v;
}

struct Range {
    std::size_t count;
    long long min, max;
    bool ordered;
    const char* what;
};

Range range_of(Shape shape) {
    switch (shape) {
        case Shape::integer: return {1, INT_MIN, INT_MAX, false, "a whole number"};
        case Shape::bytes: return {1, 0, INT_MAX, false, "a byte count"};
        case Shape::triplet_bytes: return {3, 1, INT_MAX, true, "three byte counts (min default max)"};
        case Shape::triplet_pages: return {3, 0, LLONG_MAX, true, "three page counts (min pressure max)"};
        case Shape::pair: return {2, 1, 65535, true, "two port numbers (low high)"};
        case Shape::boolean: return {1, 0, 1, false, "0 or 1"};
        case Shape::string: break;
    }
    return {0, 0, 0, false, "a string"};
}

std::optional<std::string> check_numbers(const Change& c, Range r) {
    auto ws = words(c.value);
    auto bad = [&](const std::string& why) {
        return fmt::format("{} = \"{}\" {}: {}", c.key, c.value, where(c.ns), why);
    };
    if (ws.size() != r.count)
        return bad(fmt::format("expected {}, got {} value{}", r.what, ws.size(), ws.size() == 1 ? "" : "s"));
    std::vector<long long> vs;
    for (const auto& w : ws) {
        auto v = integer(w);
        if (!v) return bad(fmt::format("`{}` is not a whole number", w));
        if (*v < r.min || *v > r.max) return bad(fmt::format("{} is out of range [{}, {}]", *v, r.min, r.max));
        vs.push_back(*v);
    }
    if (r.ordered && !std::is_sorted(vs.begin(), vs.end())) return bad("values must be in ascending order");
    return std::nullopt;
}

// A key wanlab has no table entry for: the new value must look like the current one.
std::optional<std::string> check_like(const Change& c, const std::string& current) {
    auto now = words(current);
    bool numeric =
        !now.empty() && std::all_of(now.begin(), now.end(), [](const auto& w) { return integer(w).has_value(); });
    if (!numeric) return std::nullopt;
    return check_numbers(c, {now.size(), LLONG_MIN, LLONG_MAX, false,
                             now.size() == 1 ? "a whole number, like the current value"
                                             : "whole numbers, as many as the current value has"});
}

std::optional<std::string> check_congestion(ProcSys& proc, const Change& c, const ModuleProbe& loadable) {
    auto available = words(proc.read("", kAvailable).value_or(""));
    if (!contains(available, c.value) && !loadable("tcp_" + c.value))
        return fmt::format("{} = \"{}\" {}: not available (the kernel has: {}) and no module tcp_{} is installed",
                           c.key, c.value, where(c.ns), join(available), c.value);
    if (c.ns.empty()) return std::nullopt;
    auto allowed = words(proc.read("", kAllowed).value_or(""));
    if (contains(allowed, c.value)) return std::nullopt;
    return fmt::format(
        "{} = \"{}\" {}: a namespace may only choose from {} ({}); the kernel refuses others with "
        "EPERM. Add it on the host first: sysctl -w {}=\"{}{}{}\"",
        c.key, c.value, where(c.ns), kAllowed, join(allowed), kAllowed, join(allowed), allowed.empty() ? "" : " ",
        c.value);
}

std::optional<std::string> check_one(ProcSys& proc, const Change& c, const ModuleProbe& loadable) {
    const KeyInfo* info = lookup(c.key);
    Scope scope = c.scope != Scope::unknown ? c.scope : info ? info->scope : Scope::unknown;
    if (scope == Scope::global && !c.ns.empty())
        return fmt::format("{} is global (one value for the whole machine): it is written once on the host, not {}",
                           c.key, where(c.ns));
    // Before the lab's namespaces exist, a key is looked up on the host: a new namespace has
    // the same per-namespace keys.
    std::string probe = proc.namespace_exists(c.ns) ? c.ns : "";
    auto current = proc.read(probe, c.key);
    if (!current)
        return fmt::format("{} does not exist {} (wrong name, or a module that is not loaded?)", c.key, where(probe));
    if (c.key == kCongestion) return check_congestion(proc, c, loadable);
    if (c.value.empty() || c.value.find('\n') != std::string::npos)
        return fmt::format("{} {}: the value must be one non-empty line", c.key, where(c.ns));
    if (!info) return check_like(c, *current);
    if (info->shape == Shape::string) return std::nullopt;
    return check_numbers(c, range_of(info->shape));
}

}  // namespace

std::vector<std::string> words(const std::string& value) {
    std::vector<std::string> out;
    std::string w;
    for (char ch : value + " ") {
        if (ch == ' ' || ch == '\t') {
            if (!w.empty()) out.push_back(w);
            w.clear();
        } else {
            w += ch;
        }
    }
    return out;
}

bool module_installed(const std::string& module) {
    utsname u{};
    if (::uname(&u) != 0) return false;
    std::string dir = std::string("/lib/modules/") + u.release + "/";
    for (const char* file : {"modules.dep", "modules.builtin"}) {
        std::ifstream in(dir + file);
        std::string line;
        while (std::getline(in, line)) {
            auto colon = line.find(':');
            std::string path = line.substr(0, colon);
            auto slash = path.rfind('/');
            std::string base = path.substr(slash == std::string::npos ? 0 : slash + 1);
            if (base.starts_with(module + ".ko")) return true;
        }
    }
    return false;
}

std::vector<std::string> validate(ProcSys& proc, const std::vector<Change>& changes, const ModuleProbe& loadable) {
    std::vector<std::string> problems;
    std::map<std::pair<std::string, std::string>, const Change*> seen;
    for (const auto& c : changes) {
        auto [it, fresh] = seen.emplace(std::pair{c.ns, c.key}, &c);
        if (!fresh && it->second->value != c.value) {
            problems.push_back(
                fmt::format("{} is set twice {}: \"{}\" and \"{}\"", c.key, where(c.ns), it->second->value, c.value));
            continue;
        }
        if (auto p = check_one(proc, c, loadable)) problems.push_back(*p);
    }
    return problems;
}

void validate_or_throw(ProcSys& proc, const std::vector<Change>& changes, const ModuleProbe& loadable) {
    auto problems = validate(proc, changes, loadable);
    if (problems.empty()) return;
    std::string msg = problems.size() == 1 ? "sysctl check failed, nothing was changed:"
                                           : fmt::format("{} sysctl problems, nothing was changed:", problems.size());
    for (const auto& p : problems) msg += "\n  " + p;
    throw InputError(msg);
}

}  // namespace wanlab::sysctl
