// LabNames: the names of a run's namespaces and router devices, which the plan prints in its
// tc/sysctl equivalents and the lab (lab/topology.h) creates. Kept here, before the lab in
// the pipeline, so the plan names what the lab will build without depending on it. Pure.
#pragma once

#include <string>

namespace wanlab::experiment {

/// Names of the lab the commands refer to. `run` is a placeholder until a run has an id.
struct LabNames {
    std::string run = "RUN";
    std::string ns(const std::string& host) const { return "wanlab-" + run + "-" + host; }
    /// Router devices: up (client -> server) leaves through the server side, down through
    /// the client side. Impairment sits on the router's egress, not on the endpoints.
    static constexpr const char* kRouterToServer = "wl-rs";
    static constexpr const char* kRouterToClient = "wl-rc";
};

}  // namespace wanlab::experiment
