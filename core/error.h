// The one exception type wanlab throws for failures a user can act on.
//
// Contract: what() is a complete message ("creating veth wl-c: File exists"); exit_code() is
// the process exit status main() should use (1 runtime failure, 2 bad input). Syscall and
// netlink wrappers build these with the attempted action and strerror / the kernel's text.
#pragma once

#include <stdexcept>
#include <string>

namespace wanlab {

class Error : public std::runtime_error {
public:
    explicit Error(const std::string& what, int exit_code = 1) : std::runtime_error(what), exit_code_(exit_code) {}
    int exit_code() const noexcept { return exit_code_; }

private:
    int exit_code_;
};

/// Bad input: a malformed file, an unknown option, a value out of range. Exit status 2.
class InputError : public Error {
public:
    explicit InputError(const std::string& what) : Error(what, 2) {}
};

}  // namespace wanlab
