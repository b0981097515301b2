// Placeholders in text the user writes for the lab: a service's argv and config templates,
// a probe's url. "{server}" is replaced by the server's lab address, "{dir}" by the trial's
// folder, and so on (the caller gives the values).
//
// Contract: a placeholder is `{` NAME `}` with NAME a letter or `_` followed by letters,
// digits or `_`; `{{` is a literal `{` and `}}` a literal `}`. Every other brace is text, so
// an nginx.conf's `http { ... }` needs no escaping. A NAME the caller does not know is an
// error (a typo must not reach a running server as text), with a did-you-mean. Pure;
// thread-safe.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace wanlab::text {

/// Whether `name` can be a placeholder's NAME: a letter or `_`, then letters, digits or `_`.
bool valid_placeholder_name(std::string_view name);

/// One placeholder as written: its name and the byte offset of its `{`.
struct Placeholder {
    std::string name;
    std::size_t offset = 0;
};

/// Every placeholder of `text`, in order.
std::vector<Placeholder> placeholders(std::string_view text);

/// The first placeholder of `text` whose name is not in `known`, as a message ("unknown
/// placeholder {sever}; did you mean {server}? (known: {client}, ...)"); "" when all are.
/// `offset` is set to the placeholder's `{`.
std::string unknown_placeholder(std::string_view text, const std::vector<std::string>& known, std::size_t& offset);

/// `text` with each placeholder replaced by its value and `{{`/`}}` by single braces;
/// throws InputError naming `what` for a placeholder `values` lacks.
std::string expand(std::string_view text, const std::map<std::string, std::string>& values, std::string_view what);

}  // namespace wanlab::text
