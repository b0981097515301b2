#include "remote/ssh.h"

#include <fmt/format.h>

#include "core/address.h"
#include "core/error.h"
#include "core/text.h"

namespace wanlab::remote {

std::string remote_command(const std::vector<std::string>& words) {
    std::string out;
    for (const auto& w : words) out += (out.empty() ? "" : " ") + text::shell_quote(w);
    return out;
}

std::vector<std::string> agent_argv(const Destination& d, const std::filesystem::path& control_dir,
                                    const std::string& self) {
    if (d.local()) return {d.wanlab == "wanlab" ? self : d.wanlab, "agent"};
    if (auto why = addr::ssh_destination_problem(d.ssh); !why.empty())
        throw InputError(fmt::format("[hosts.{}] ssh = \"{}\": {}", d.name, d.ssh, why));
    std::vector<std::string> argv{"ssh"};
    if (!d.ssh_config.empty()) argv.insert(argv.end(), {"-F", d.ssh_config});
    for (const char* o : {"BatchMode=yes", "ControlMaster=auto", "ControlPersist=no",
                          // The controller's side of a dead path: ssh gives up within 15 s.
                          "ServerAliveInterval=5", "ServerAliveCountMax=3", "LogLevel=ERROR"})
        argv.insert(argv.end(), {"-o", o});
    argv.insert(argv.end(), {"-o", "ControlPath=" + (control_dir / "%C").string()});
    argv.insert(argv.end(), {"-T", "--", d.ssh, remote_command({d.wanlab, "agent"})});
    return argv;
}

}  // namespace wanlab::remote
