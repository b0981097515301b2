// Whether this process may change the machine's network: CAP_NET_ADMIN (links, qdiscs,
// sysctls under net.*) and CAP_SYS_ADMIN (creating, mounting and entering namespaces).
//
// Contract: read from CapEff in /proc/self/status, without side effects. require_*() throws
// wanlab::Error naming each missing capability before anything has been touched. Thread-safe.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "experiment/experiment.h"

namespace wanlab::lab {

/// Names of the capabilities wanlab needs that are missing from an effective set `cap_eff`
/// (the hex mask /proc/self/status prints as CapEff), e.g. {"CAP_SYS_ADMIN"}.
std::vector<std::string> missing_capabilities(std::uint64_t cap_eff);

/// This process's effective capability mask.
std::uint64_t effective_capabilities();

/// Throws wanlab::Error "`<action>` needs CAP_NET_ADMIN and CAP_SYS_ADMIN; missing: ..." .
void require_capabilities(const std::string& action);

/// The qdisc kinds (netem, tbf, htb, pfifo, bfifo, fq_codel, cake) the experiment's trials
/// put on links, and those of them this kernel lacks (tried in a scratch namespace; needs
/// the capabilities above).
std::set<std::string> needed_qdiscs(const experiment::Experiment& exp);
std::set<std::string> needed_qdiscs(const std::vector<experiment::Trial>& trials);
std::vector<std::string> missing_qdiscs(const experiment::Experiment& exp);
/// Those of `needed` (qdisc kinds, "ingress", "ifb") this kernel lacks.
std::vector<std::string> missing_features(const std::set<std::string>& needed);

}  // namespace wanlab::lab
