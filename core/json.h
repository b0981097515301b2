// JSON that came from outside wanlab: an agent's request or reply, a results database someone
// else wrote, a journal, a command's output. nlohmann's parser does not recurse, but copying,
// comparing and dumping a value do, so a deeply nested value would overflow the stack long after
// it was read (issue 40). Everything untrusted is parsed here, with a bound on its nesting, and
// dumped with invalid UTF-8 replaced rather than thrown on.
//
// Contract: pure; thread-safe.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"

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

/// j[name] as T, checked before it is read: throws InputError "WHERE: `NAME` must be ..."
/// when `j` is not an object, the field is missing, or of another JSON type; an integer must
/// fit T (nlohmann's get<> would wrap 70000 into a uint16_t), a string be at most 1 MiB.
template <class T>
T field(const nlohmann::json& j, std::string_view name, std::string_view where) {
    auto refuse = [&](std::string_view why) { throw InputError(fmt::format("{}: `{}` {}", where, name, why)); };
    if (!j.is_object()) throw InputError(fmt::format("{}: must be a JSON object", where));
    auto it = j.find(name);
    if (it == j.end()) refuse("is missing");
    if constexpr (std::is_same_v<T, bool>) {
        if (!it->is_boolean()) refuse("must be true or false");
    } else if constexpr (std::is_integral_v<T>) {
        using L = std::numeric_limits<T>;
        bool fits = false;
        if (it->is_number_unsigned())
            fits = it->template get<std::uint64_t>() <= static_cast<std::uint64_t>(L::max());
        else if constexpr (std::is_signed_v<T>)
            fits = it->is_number_integer() && it->template get<std::int64_t>() >= static_cast<std::int64_t>(L::min()) &&
                   it->template get<std::int64_t>() <= static_cast<std::int64_t>(L::max());
        if (!fits) refuse(fmt::format("must be a whole number from {} to {}", L::min(), L::max()));
    } else if constexpr (std::is_floating_point_v<T>) {
        if (!it->is_number()) refuse("must be a number");
    } else if constexpr (std::is_same_v<T, std::string>) {
        if (!it->is_string() || it->template get_ref<const std::string&>().size() > (1u << 20))
            refuse("must be a string of at most 1 MiB");
    } else {
        try {
            return it->template get<T>();
        } catch (const nlohmann::json::exception&) {
            refuse("is not of the type this field takes");
        }
    }
    return it->template get<T>();
}

/// field<T>() of a field that may be left out: `fallback` when `j` has no `name`.
template <class T>
T field_or(const nlohmann::json& j, std::string_view name, T fallback, std::string_view where) {
    if (j.is_object() && !j.contains(name)) return fallback;
    return field<T>(j, name, where);
}

}  // namespace wanlab::json_input
