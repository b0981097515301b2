// The narrow interface to /proc/sys that everything which reads or writes kernel settings
// goes through, and its real implementation.
//
// Contract: keys are dotted (net.ipv4.tcp_rmem); a namespace is the name of a network
// namespace, "" meaning the namespace wanlab runs in (the init namespace
// on a host). read() returns the value exactly as the kernel prints it, without the final
// newline (triplets keep their tabs: "4096\t131072\t6291456"), so writing it back restores
// it exactly; nullopt when the key does not exist there. write() throws wanlab::Error naming
// the key, the namespace, the value and the kernel's errno text. RealProcSys is thread-safe.
// The unit tests' in-memory fake is tests/support/fake_proc_sys.h.
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
    /// True for "" and for a namespace that exists (core/sys.h).
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

}  // namespace wanlab::sysctl
