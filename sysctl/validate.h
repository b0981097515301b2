// Checks a set of sysctl changes against the running kernel before anything is written.
//
// Contract: validate() reads only (through ProcSys) and returns one message per problem,
// empty when every change may be applied: the key exists in that namespace (or, before the
// lab's namespaces exist, on the host), the value parses and is in range for the key's shape,
// a congestion control is available or loadable and, in a namespace other than the host's,
// listed in tcp_allowed_congestion_control (the kernel refuses others with EPERM), and global
// keys are written once, on the host. Messages name the key, the value and the namespace.
// Thread-safe if the ProcSys is.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "sysctl/proc_sys.h"
#include "sysctl/sysctl_spec.h"

namespace wanlab::sysctl {

/// One value to write: `ns` as in ProcSys ("" = the host).
struct Change {
    std::string ns;
    std::string key;
    std::string value;
    Scope scope = Scope::unknown;
};

/// True if a module of this name ("tcp_bbr") could be loaded by the kernel on demand.
using ModuleProbe = std::function<bool(const std::string& module)>;

/// Looks in /lib/modules/$(uname -r)/modules.dep and modules.builtin.
bool module_installed(const std::string& module);

/// Words of a /proc/sys value, split at spaces and tabs.
std::vector<std::string> words(const std::string& value);

/// Every problem found, as complete sentences; empty when all changes may go ahead.
std::vector<std::string> validate(ProcSys& proc, const std::vector<Change>& changes,
                                  const ModuleProbe& loadable = module_installed);

/// validate(), throwing wanlab::InputError with every message when there is a problem.
void validate_or_throw(ProcSys& proc, const std::vector<Change>& changes,
                       const ModuleProbe& loadable = module_installed);

}  // namespace wanlab::sysctl
