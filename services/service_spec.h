// What a [[service]] is, as the experiment file sees it: the user's own program, started on
// one lab host for every trial (after the trial's sysctls, so new buffer maxima reach the
// sockets it creates), checked ready before the probes, stopped after them.
//
//   [[service]]
//   name = "web"
//   host = "server"                      # client, router, server; "host" in host mode
//   command = ["nginx", "-c", "{dir}/nginx.conf", "-e", "stderr", "-g", "daemon off;"]
//   files = { "nginx.conf" = "nginx/nginx.conf" }   # templates, relative to the experiment file
//   vars = { nodelay = "off" }                      # {nodelay} in argv and templates
//   ready = { port = 8080, timeout = "10s" }        # or { command = [...] } or { delay = "1s" }
//   stop_timeout = "5s"                             # SIGTERM, then SIGKILL after this
//
// Contract: parse_service() reads one table strictly (unknown keys get a did-you-mean) and
// reads each template file once, so a missing file or an unknown placeholder is a located
// error before anything runs. Argv is an array of strings, never a shell string; its first
// word names the program and takes no placeholder. Pure apart from reading the templates;
// thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/diagnostic.h"

namespace wanlab::services {

/// What tells a service is ready for the probes.
struct ReadyCheck {
    enum class Kind { none, port, command, delay };
    Kind kind = Kind::none;
    std::uint16_t port = 0;                                      ///< port: a TCP connect to address:port succeeds
    std::string address;                                         ///< port: "" = the service host's lab address
    std::vector<std::string> command;                            ///< command: exits 0, run in the service's host
    std::chrono::nanoseconds delay{0};                           ///< delay: this long after the start
    std::chrono::nanoseconds timeout{std::chrono::seconds(10)};  ///< port, command: give up after
};

/// A config file rendered from a template into the trial's folder before the start.
struct TemplateFile {
    std::string name;    ///< file name in {dir}: letters, digits, `.`, `-`, `_`
    std::string source;  ///< the template's path as resolved
    std::string text;    ///< the template, read at load
    Location at;
    unsigned mode = 0644;  ///< the source's permission bits: the rendered file gets the same
};

struct ServiceSpec {
    std::string name;  ///< unique among the services; names its log files
    std::string host;  ///< a lab host (LabSpec::hosts())
    std::vector<std::string> command;
    ReadyCheck ready;
    std::chrono::nanoseconds stop_timeout{std::chrono::seconds(5)};
    std::vector<TemplateFile> files;
    std::map<std::string, std::string> vars;
    Location at;  ///< the [[service]] header
};

/// The placeholders wanlab gives every service: the lab addresses, the trial's id, the run's
/// id and the trial's folder. `vars` add to them.
inline const std::vector<std::string> kPlaceholders{"server", "client", "trial", "run", "dir"};

/// Reads one [[service]] table. `hosts` are the lab's hosts; `base` the folder template
/// paths are relative to (the experiment file's); `docs`, if given, gets each template's
/// text so a located error in it shows its line.
ServiceSpec parse_service(const config::Node& table, std::size_t index, const std::vector<std::string>& hosts,
                          const std::filesystem::path& base, config::Documents* docs, Diagnostics& diag);

/// Every placeholder a service may use: kPlaceholders and its vars.
std::vector<std::string> placeholder_names(const ServiceSpec& s);

}  // namespace wanlab::services
