// FakeProcSys: an in-memory /proc/sys for unit tests: values per (namespace, key), a log of
// writes, and keys that refuse a write with a given errno. Not thread-safe.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "sysctl/proc_sys.h"

namespace wanlab::sysctl {

/// An in-memory /proc/sys: values per (namespace, key), with a log of writes.
class FakeProcSys final : public ProcSys {
public:
    struct Write {
        std::string ns, key, value;
        bool operator==(const Write&) const = default;
    };
    std::map<std::pair<std::string, std::string>, std::string> values;
    std::set<std::string> namespaces;  ///< besides ""
    std::vector<Write> writes;
    /// Writes to these (ns, key) fail with this errno, like a read-only or refused key.
    std::map<std::pair<std::string, std::string>, int> refuse;

    void set(const std::string& ns, const std::string& key, const std::string& value) { values[{ns, key}] = value; }
    std::optional<std::string> read(const std::string& ns, const std::string& key) override;
    void write(const std::string& ns, const std::string& key, const std::string& value) override;
    bool namespace_exists(const std::string& ns) override;
};

}  // namespace wanlab::sysctl
