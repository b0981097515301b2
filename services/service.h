// A [[service]] running for one trial: its files rendered, its process started on its lab
// host with stdout and stderr in the trial's folder, checked ready, watched, and stopped.
//
// Contract: Service is one RAII resource. Creates: the trial folder's rendered templates
// ({dir}/NAME), <name>.stdout and <name>.stderr there, then the process (a sys::Process in
// its own process group, in the host's network namespace, SIGKILLed if wanlab's thread
// dies before it is stopped); `started` is called right after the spawn, before anything
// waits on it, so the caller journals the group (lab/journal.h "process"). Undoes: SIGTERM
// to the group, SIGKILL to what is left after stop_timeout, the leader reaped and no member
// of the group left. A service that exits or fails its ready check throws ServiceFailure
// with its last lines of stderr. Not thread-safe; the destructor never throws.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "core/error.h"
#include "core/process.h"
#include "probes/probe.h"
#include "services/service_spec.h"

namespace wanlab::services {

/// A service that could not start, did not become ready, or died during its trial: that
/// trial fails with this message; the run goes on.
class ServiceFailure : public Error {
public:
    using Error::Error;
};

/// Where a service runs: a lab host's namespace ("" = wanlab's own) and address.
struct Placement {
    std::string netns;
    std::string address;  ///< what a ready port check connects to
};

class Service {
public:
    /// `values` fills the placeholders (kPlaceholders, the spec's vars are added); `dir` is the
    /// trial's folder, made by the caller. Throws ServiceFailure if it cannot start.
    Service(const ServiceSpec& spec, const Placement& where, std::map<std::string, std::string> values,
            const std::filesystem::path& dir, const std::function<void(pid_t pgid)>& started);
    ~Service();
    Service(const Service&) = delete;
    Service& operator=(const Service&) = delete;

    /// Waits for the ready check, calling `tick` at least every 100 ms; throws
    /// ServiceFailure when the check times out or the service exits meanwhile.
    void wait_ready(const probes::Tick& tick);
    /// Throws ServiceFailure if the service has exited.
    void check_running();
    /// SIGTERM, then SIGKILL after stop_timeout; idempotent. Returns how it ended.
    std::string stop();

    const ServiceSpec& spec() const { return spec_; }
    pid_t pid() const { return pid_; }

private:
    std::string failure(const std::string& what) const;
    ServiceSpec spec_;
    Placement where_;
    std::map<std::string, std::string> values_;
    std::filesystem::path out_, err_;
    std::unique_ptr<sys::Process> process_;
    pid_t pid_ = -1;
    bool stopped_ = false;
};

/// The text of `argv` with its placeholders filled, for the plan and messages.
std::vector<std::string> expand_argv(const std::vector<std::string>& argv,
                                     const std::map<std::string, std::string>& values, const std::string& what);

}  // namespace wanlab::services
