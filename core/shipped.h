// Where wanlab finds the data it ships (profiles/, examples/): the source tree while it runs
// from the build tree it was built in (a developer's build, the tests), otherwise the
// installed share/wanlab beside its binary (BIN/../share/wanlab: a package, or `cmake
// --install` to any prefix), then the share/wanlab of the prefix it was configured with.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace wanlab::shipped {

/// The folders that may hold shipped `what` ("profiles", "examples"), first first; some may
/// not exist.
std::vector<std::string> dirs(std::string_view what);

}  // namespace wanlab::shipped
