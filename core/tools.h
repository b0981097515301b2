// The external programs wanlab runs and the Debian packages that bring them: one table, read
// by find_tool()'s "not installed" message, `wanlab doctor` and `wanlab vm fetch`.
//
// Contract: pure, thread-safe. A program not in the table is its own package name.
#pragma once

#include <span>
#include <string>

namespace wanlab::sys {

struct KnownTool {
    const char* name;
    const char* package;       ///< the Debian package that installs it
    const char* version_flag;  ///< what makes it print its version ("" = no argument)
    const char* use;           ///< what wanlab needs it for ("" = an internal step, not listed by doctor)
};

/// Every row, doctor's in the order it lists them first.
std::span<const KnownTool> known_tools();
/// The row of `name`, or nullptr.
const KnownTool* known_tool(const std::string& name);
/// The Debian package that installs `tool` (its own name when the table does not know it).
std::string debian_package(const std::string& tool);

}  // namespace wanlab::sys
