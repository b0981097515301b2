// The narrow interface to /proc/sys that everything which reads or writes kernel settings
// goes through, with the real implementation and an in-memory fake for unit tests.
//
// Contract: keys are dotted (net.ipv4.tcp_rmem); a namespace is the name of a network
// namespace under /run/netns, "" meaning the namespace wanlab runs in (the init namespace
// on a host). read() returns the value exactly as the kernel prints it, without the final
// newline (triplets keep their tabs: "4096\t131072\t6291456"), so writing it back restores
// it exactly; nullopt when the key does not exist there. write() throws wanlab::Error naming
// the key, the namespace, the value and the kernel's errno text. RealProcSys is thread-safe;
// FakeProcSys is not.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace wanlab::sysctl {

class ProcSys {
public:
    virtual ~ProcSys() = default;
    /// The current value, or nullopt when `key` does not exist in namespace `ns`.
    virtual std::optional<std::string> read(const std::string& ns, const std::string& key) = 0;
    /// Writes `value`; throws wanlab::Error when the kernel refuses.
    virtual void write(const std::string& ns, const std::string& key, const std::string& value) = 0;
    /// True for "" and for a namespace that exists under /run/netns.
    virtual bool namespace_exists(const std::string& ns) = 0;
};

/// "/proc/sys/net/ipv4/tcp_rmem" for "net.ipv4.tcp_rmem".
std::string proc_path(const std::string& key);

/// "on the host" for "", "in namespace NAME" otherwise: the end of a message.
std::string where(const std::string& ns);

/// Reads and writes /proc/sys, inside the namespace (through sys::in_netns).
class RealProcSys final : public ProcSys {
public:
    std::optional<std::string> read(const std::string& ns, const std::string& key) override;
    void write(const std::string& ns, const std::string& key, const std::string& value) override;
    bool namespace_exists(const std::string& ns) override;
};

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
