#include "tests/support/fake_proc_sys.h"

#include <cerrno>

#include <fmt/format.h>

#include "core/sys.h"

namespace wanlab::sysctl {

std::optional<std::string> FakeProcSys::read(const std::string& ns, const std::string& key) {
    auto it = values.find({ns, key});
    if (it == values.end()) return std::nullopt;
    return it->second;
}

void FakeProcSys::write(const std::string& ns, const std::string& key, const std::string& value) {
    std::string what = fmt::format("setting {} = \"{}\" {}", key, value, where(ns));
    if (!namespace_exists(ns)) sys::fail(what, ENOENT);
    if (auto it = refuse.find({ns, key}); it != refuse.end()) sys::fail(what, it->second);
    if (!values.count({ns, key})) sys::fail(what, ENOENT);
    writes.push_back({ns, key, value});
    values[{ns, key}] = value;
}

bool FakeProcSys::namespace_exists(const std::string& ns) { return ns.empty() || namespaces.count(ns) > 0; }

}  // namespace wanlab::sysctl
