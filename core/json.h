// JSON that came from outside wanlab: an agent's request or reply, a results database someone
// else wrote, a journal, a command's output. nlohmann's parser does not recurse, but copying,
// comparing and dumping a value do, so a deeply nested value would overflow the stack long after
// it was read (issue 40). Everything untrusted is parsed here, with a bound on its nesting, and
// dumped with invalid UTF-8 replaced rather than thrown on.
//
// Contract: pure; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace wanlab::json_input {

/// The deepest nesting accepted: every format wanlab reads needs fewer than 10 levels.
inline constexpr int kMaxDepth = 64;

/// `text` parsed, or a discarded value (is_discarded()) when it is not JSON or nests deeper
/// than `max_depth` arrays and objects.
nlohmann::json parse(std::string_view text, int max_depth = kMaxDepth);

/// `text` parsed; throws wanlab::Error "WHAT: not JSON, or nested deeper than 64 levels".
nlohmann::json parse_or_throw(std::string_view text, std::string_view what, int max_depth = kMaxDepth);

/// j.dump() with invalid UTF-8 replaced by U+FFFD instead of an exception; `indent` as dump's.
std::string dump(const nlohmann::json& j, int indent = -1);

}  // namespace wanlab::json_input
