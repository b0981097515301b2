// `wanlab restore [RUN]...`: gives the machine back after a run that was killed (SIGKILL,
// power to the process cut) and left its journal under /run/wanlab. Replays each stale
// journal newest entry first; safe to run again. Live runs are left alone.
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "cli/command.h"
#include "core/error.h"
#include "core/text.h"
#include "lab/capabilities.h"
#include "lab/journal.h"
#include "lab/restore.h"
#include "lab/session.h"
#include "sysctl/proc_sys.h"

namespace wanlab::cli {

namespace {
int forget(const std::vector<std::string>& runs) {
    if (runs.empty()) throw InputError("`wanlab restore --forget` needs the runs to forget, by name");
    lab::require_capabilities("wanlab restore --forget");
    lab::FileLock lock(std::filesystem::path(lab::kRunDir) / "lock", true, "the journal directory");
    int status = 0;
    for (const auto& run : runs) {
        lab::check_run_id(run);
        auto path = std::filesystem::path(lab::kRunDir) / (run + ".journal");
        auto j = lab::read_journal(path);
        if (j.problem.empty() && j.live()) {
            std::puts(fmt::format("wanlab restore: run {} is live (pid {}); not forgotten", run, j.pid).c_str());
            status = 1;
            continue;
        }
        if (::unlink(path.c_str()) != 0) {
            std::fputs(fmt::format("wanlab: error: removing {}: {}\n", path.string(), std::strerror(errno)).c_str(),
                       stderr);
            status = 1;
            continue;
        }
        std::puts(fmt::format("wanlab restore: forgot run {} ({}); nothing was undone", run, path.string()).c_str());
    }
    return status;
}
}  // namespace

Runner setup_restore(CLI::App& sub) {
    struct Options {
        std::vector<std::string> runs;
        bool forget = false;
    };
    auto o = std::make_shared<Options>();
    sub.add_option("RUN", o->runs, "Only these runs (default: every stale journal)");
    sub.add_flag("--forget", o->forget,
                 "Remove the named runs' journals without undoing anything (for a journal wanlab cannot read or "
                 "trust, once you have checked the machine by hand)");
    return [o] {
        if (o->forget) return forget(o->runs);
        auto say = [](const std::string& s) { std::fputs(fmt::format("  {}\n", s).c_str(), stdout); };
        auto wanted = [&] {
            auto journals = lab::find_journals(lab::kRunDir);
            std::erase_if(journals, [&](const lab::JournalFile& j) {
                return !o->runs.empty() && std::find(o->runs.begin(), o->runs.end(), j.run) == o->runs.end();
            });
            return journals;
        };
        if (wanted().empty()) {
            std::puts("wanlab restore: nothing to restore");
            return 0;
        }
        lab::require_capabilities("wanlab restore");
        lab::FileLock lock(std::filesystem::path(lab::kRunDir) / "lock", true, "the journal directory");
        auto journals = wanted();  // again, under the lock
        sysctl::RealProcSys proc;
        auto undo = lab::machine_undo(proc, say);
        int status = 0;
        bool skipped = false;
        for (const auto& j : journals) {
            if (!j.problem.empty()) {
                std::fputs(fmt::format("wanlab: error: {}\n  check the machine by hand, then `wanlab restore --forget "
                                       "{}`\n",
                                       text::terminal_safe(j.problem), text::shell_quote(j.run))
                               .c_str(),
                           stderr);
                status = 1;
                continue;
            }
            if (j.live()) {
                std::puts(fmt::format("wanlab restore: run {} is live (pid {}); stop it with `wanlab lab down {}`",
                                      j.run, j.pid, j.run)
                              .c_str());
                skipped = true;
                if (!o->runs.empty()) status = 1;  // asked for by name, and not restored
                continue;
            }
            std::puts(fmt::format("wanlab restore: run {} ({} entries)", j.run, j.entries.size()).c_str());
            auto failures = lab::restore_journal(j, undo);
            for (const auto& f : failures)
                std::fputs(fmt::format("wanlab: error: {}\n", text::terminal_safe(f)).c_str(), stderr);
            if (!failures.empty()) {
                status = 1;
                std::fputs(
                    fmt::format("  the journal stays: run `wanlab restore {}` again once the cause is fixed, or, "
                                "for entries wanlab did not write, check the machine by hand and `wanlab "
                                "restore --forget {}`\n",
                                text::shell_quote(j.run), text::shell_quote(j.run))
                        .c_str(),
                    stderr);
            }
        }
        if (status == 0 && !skipped) std::puts("wanlab restore: the machine is back as it was");
        return status;
    };
}

}  // namespace wanlab::cli
