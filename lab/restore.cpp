#include "lab/restore.h"

#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "core/error.h"
#include "core/proc.h"
#include "core/text.h"
#include "lab/link.h"
#include "lab/netns.h"
#include "netem/device.h"
#include "netem/kernel.h"
#include "sysctl/snapshot.h"

namespace wanlab::lab {

Undo machine_undo(sysctl::ProcSys& proc, const Log& log) {
    auto say = [log](const std::string& s) {
        if (log) log(s);
    };
    Undo u;
    u.netns = [say](const std::string& name) {
        if (!NetNamespace::exists(name)) return;
        NetNamespace::remove(name);
        say(fmt::format("deleted network namespace {}", name));
    };
    u.link = [say](const std::string& ns, const std::string& name) {
        if (!ns.empty() && !NetNamespace::exists(ns)) return;  // went with its namespace
        if (!RouteSocket(ns).has(name)) return;
        VethPair::remove(ns, name);
        say(fmt::format("deleted device {} {}", name, sysctl::where(ns)));
    };
    u.sysctl = [say, &proc](const std::string& ns, const std::string& key, const std::string& old,
                            const std::string& wrote) {
        auto g = sysctl::give_back(proc, ns, key, old, wrote);
        if (!g.left_alone.empty()) say("left alone: " + g.left_alone);
        if (g.restored) say(fmt::format("restored {} = \"{}\" {}", key, old, sysctl::where(ns)));
    };
    u.qdisc = [say](const std::string& ns, const std::string& dev, const std::string& snapshot) {
        if (!ns.empty() && !NetNamespace::exists(ns)) return;  // went with its namespace
        if (!RouteSocket(ns).has(dev)) return;                 // went with its device
        netem::NetlinkKernel kernel(ns);
        auto device = netem::DeviceQdiscs::from_serialized(kernel, dev, snapshot);
        device.restore();
        device.release();
        say(fmt::format("restored the qdiscs of {} {}", dev, sysctl::where(ns)));
    };
    u.host = [say](const std::string& ns, const netem::HostUndo& host) {
        if (!ns.empty() && !NetNamespace::exists(ns)) return;
        netem::NetlinkKernel kernel(ns);
        netem::undo_host(kernel, host);
        say(fmt::format("restored the qdiscs and filters of {}{} {}", host.dev,
                        host.ifb.empty() ? "" : fmt::format(" (and removed {} if present)", host.ifb),
                        sysctl::where(ns)));
    };
    u.process = [say](const std::string& name, pid_t pgid, unsigned long long start_time) {
        auto members = sys::group_members(pgid);
        if (!sys::kill_group(pgid, start_time)) return;  // gone, or the pid is someone else's now
        auto left = sys::wait_gone(members, 2000);
        if (!left.empty())
            throw Error(fmt::format("service {} (process group {}): {} processes still running after SIGKILL", name,
                                    pgid, left.size()));
        say(fmt::format("stopped service {} (process group {}, {} processes)", name, pgid, members.size()));
    };
    u.folder = [say](const std::string& path) {
        // A folder it made, never what a symlink planted in its place points to.
        struct stat st {};
        if (::lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return;
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
        if (ec) throw Error(fmt::format("removing {}: {}", path, ec.message()));
        say(fmt::format("removed the run's folder {}", path));
    };
    return u;
}

std::vector<std::string> restore_journal(const JournalFile& journal, const Undo& undo) {
    auto failures = replay(journal, undo);
    if (failures.empty() && ::unlink(journal.path.c_str()) != 0 && errno != ENOENT)
        failures.push_back(fmt::format("removing {}: {}", journal.path.string(), std::strerror(errno)));
    return failures;
}

std::vector<JournalFile> stale_journals(const std::filesystem::path& dir) {
    std::vector<JournalFile> out;
    for (auto& j : find_journals(dir))
        if (!j.live()) out.push_back(std::move(j));
    return out;
}

void settle_stale_journals(const std::filesystem::path& dir, bool restore, sysctl::ProcSys& proc, const Log& log,
                           const std::string& own) {
    auto stale = stale_journals(dir);
    if (stale.empty()) return;
    // Only this run's own journal: the others are still the user's to decide about.
    const bool only_own = std::all_of(stale.begin(), stale.end(), [&](const auto& j) { return j.run == own; });
    if (only_own && !restore && log) log(fmt::format("run {}: giving back what its killed session left", own));
    restore = restore || only_own;
    for (const auto& j : stale)
        if (!j.problem.empty())
            throw Error(
                fmt::format("{}; nothing was changed.\nwanlab cannot undo what this journal describes. Check "
                            "the machine by hand (`ip netns`, `tc qdisc`, `sysctl net`), then remove it with "
                            "`wanlab restore --forget {}`.",
                            j.problem, text::shell_quote(j.run)));
    if (!restore) {
        std::string list;
        for (const auto& j : stale) list += fmt::format("\n  run {} (pid {}): {}", j.run, j.pid, j.path.string());
        throw Error(
            fmt::format("a previous wanlab run ended without giving the machine back; nothing was changed.{}\n"
                        "Run `wanlab restore` first, or pass --restore to do it now.",
                        list));
    }
    Undo undo = machine_undo(proc, log);
    for (const auto& j : stale) {
        auto failures = restore_journal(j, undo);
        if (failures.empty()) continue;
        std::string msg = fmt::format("restoring run {} failed; nothing new was changed:", j.run);
        for (const auto& f : failures) msg += "\n  " + f;
        msg += fmt::format(
            "\nFix what is named and run `wanlab restore` again; for entries wanlab did not write, "
            "check the machine by hand, then `wanlab restore --forget {}`.",
            text::shell_quote(j.run));
        throw Error(msg);
    }
}

}  // namespace wanlab::lab
