#include "core/placeholders.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/diagnostic.h"
#include "core/error.h"

namespace wanlab::text {
namespace {

bool name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

/// The length of the placeholder `{NAME}` at `at` (text[at] == '{'), 0 if none starts there.
std::size_t placeholder_at(std::string_view text, std::size_t at) {
    std::size_t i = at + 1;
    if (i >= text.size() || !name_start(text[i])) return 0;
    while (i < text.size() && name_char(text[i])) ++i;
    return i < text.size() && text[i] == '}' ? i + 1 - at : 0;
}

/// Walks `text`, calling `literal(piece)` for text and `named(name, offset)` for placeholders.
template <class Literal, class Named>
void walk(std::string_view text, Literal literal, Named named) {
    std::size_t i = 0, start = 0;
    while (i < text.size()) {
        char c = text[i];
        if ((c == '{' || c == '}') && i + 1 < text.size() && text[i + 1] == c) {
            literal(text.substr(start, i + 1 - start));  // keeps one brace of the pair
            i += 2;
            start = i;
        } else if (std::size_t n = c == '{' ? placeholder_at(text, i) : 0) {
            literal(text.substr(start, i - start));
            named(std::string(text.substr(i + 1, n - 2)), i);
            i += n;
            start = i;
        } else {
            ++i;
        }
    }
    literal(text.substr(start));
}

}  // namespace

bool valid_placeholder_name(std::string_view name) {
    return !name.empty() && name_start(name.front()) && std::all_of(name.begin(), name.end(), name_char);
}

std::vector<Placeholder> placeholders(std::string_view text) {
    std::vector<Placeholder> found;
    walk(
        text, [](std::string_view) {},
        [&](const std::string& name, std::size_t offset) {
            found.push_back({name, offset});
        });
    return found;
}

std::string unknown_placeholder(std::string_view text, const std::vector<std::string>& known, std::size_t& offset) {
    for (const auto& p : placeholders(text)) {
        if (std::find(known.begin(), known.end(), p.name) != known.end()) continue;
        offset = p.offset;
        auto guess = did_you_mean(p.name, known);
        std::vector<std::string> braced;
        for (const auto& k : known) braced.push_back("{" + k + "}");
        return fmt::format("unknown placeholder {{{}}}{} (known: {}; write {{{{ for a literal brace)", p.name,
                           guess.empty() ? "" : fmt::format("; did you mean {{{}}}?", guess), fmt::join(braced, ", "));
    }
    return {};
}

std::string expand(std::string_view text, const std::map<std::string, std::string>& values, std::string_view what) {
    std::string out;
    out.reserve(text.size());
    walk(
        text, [&](std::string_view piece) { out.append(piece); },
        [&](const std::string& name, std::size_t) {
            auto it = values.find(name);
            if (it == values.end())
                throw InputError(fmt::format("{}: placeholder {{{}}} has no value here", what, name));
            out += it->second;
        });
    return out;
}

}  // namespace wanlab::text
