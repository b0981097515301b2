#include "core/process.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>

#include "core/sys.h"

namespace wanlab::sys {

pid_t fork_detached(const std::filesystem::path& log, std::string_view what) {
    Fd out(::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644));
    if (!out) fail_errno(std::string(what) + ": cannot write its log " + log.string());
    Fd in(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    std::fflush(nullptr);
    pid_t pid = static_cast<pid_t>(check_sys(::fork(), std::string(what) + ": fork"));
    if (pid > 0) return pid;
    ::setsid();
    ::dup2(in.get(), STDIN_FILENO);
    ::dup2(out.get(), STDOUT_FILENO);
    ::dup2(out.get(), STDERR_FILENO);
    return 0;
}

}  // namespace wanlab::sys
