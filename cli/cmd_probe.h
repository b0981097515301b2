// `wanlab probe`'s command line, apart from measuring: its options (every [[probe]] option of
// every kind, spelled with dashes) and where they say to measure. Pure, for the tests.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "probes/probe.h"
#include "probes/probe_spec.h"

namespace wanlab::cli {

struct ProbeArgs {
    std::string kind;
    std::map<std::string, std::string> values;  ///< [[probe]] key (underscores) -> value as written
    std::string server_ns, client_ns, address, client_address;
    std::uint16_t port = 0;
    bool json = false, samples = false;
    /// Link conditions for the lab wanlab builds: [link] key -> value as written (`--rtt`,
    /// `--loss`, `--link-rate`; `--rate` and `--gap` where the kind has no option of that name),
    /// and a link profile.
    std::map<std::string, std::string> link;
    std::string profile;
    bool no_vm = false;  ///< refuse, rather than move into the micro-VM, when the kernel lacks netem
};

/// Declares `wanlab probe`'s arguments and options on `sub`, filling `args`.
void add_probe_options(CLI::App& sub, ProbeArgs& args);

/// The probe the arguments describe, checked exactly as a [[probe]] table (errors printed to
/// stderr as that table, then wanlab::InputError).
/// `args` with each flag a kind and a [link] key share (`--rate`, `--gap`) moved to the link
/// conditions when the chosen kind has no option of that name.
ProbeArgs sorted_out(ProbeArgs args);

probes::ProbeSpec resolve(const ProbeArgs& args);

/// Where to measure: the endpoints the user named (--address, or an http probe's url, whose
/// host is the server: the client runs in --client-ns or here), or std::nullopt for a bare
/// two-namespace lab. Throws wanlab::InputError for namespaces without an address.
std::optional<probes::Endpoints> given_endpoints(const ProbeArgs& args, const probes::ProbeSpec& spec);

}  // namespace wanlab::cli
