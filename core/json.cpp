#include "core/json.h"

#include <fmt/format.h>

#include "core/error.h"

namespace wanlab::json_input {
namespace {

struct TooDeep {};

}  // namespace

nlohmann::json parse(std::string_view text, int max_depth) {
    // The callback sees each value as it starts, with its depth; throwing stops the parser
    // before anything deeper is built.
    auto bound = [max_depth](int depth, nlohmann::json::parse_event_t event, nlohmann::json&) {
        if ((event == nlohmann::json::parse_event_t::object_start ||
             event == nlohmann::json::parse_event_t::array_start) &&
            depth >= max_depth)
            throw TooDeep{};
        return true;
    };
    try {
        return nlohmann::json::parse(text.begin(), text.end(), bound, false);
    } catch (const TooDeep&) {
        return nlohmann::json(nlohmann::json::value_t::discarded);
    }
}

nlohmann::json parse_or_throw(std::string_view text, std::string_view what, int max_depth) {
    auto j = parse(text, max_depth);
    if (j.is_discarded()) throw Error(fmt::format("{}: not JSON, or nested deeper than {} levels", what, max_depth));
    return j;
}

std::string dump(const nlohmann::json& j, int indent) {
    return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace wanlab::json_input
