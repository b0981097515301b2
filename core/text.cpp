#include "core/text.h"

#include <cctype>

#include <algorithm>

#include <fmt/format.h>

namespace wanlab::text {
namespace {
bool plain(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("-_.,:/=@%+").find(c) != std::string_view::npos;
}

// The length of the control character at s[i] (1 for C0/DEL, 2 for C1 in UTF-8), 0 if none.
// The length of the control character at s[i], 0 if there is none: C0, DEL, C1 (U+0080-U+009F),
// and the invisible characters that change how a line reads without showing themselves: the
// zero-width ones and direction marks (U+200B-U+200F), the line and paragraph separators
// (U+2028, U+2029), the bidi embeddings and overrides (U+202A-U+202E) and isolates
// (U+2066-U+2069), and the byte order mark (U+FEFF), all in UTF-8.
std::size_t control_at(std::string_view s, std::size_t i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) return 1;
    auto at = [&](std::size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0u; };
    if (c == 0xc2 && at(1) >= 0x80 && at(1) <= 0x9f) return 2;
    if (c == 0xe2 && at(1) == 0x80 && ((at(2) >= 0x8b && at(2) <= 0x8f) || (at(2) >= 0xa8 && at(2) <= 0xae))) return 3;
    if (c == 0xe2 && at(1) == 0x81 && at(2) >= 0xa6 && at(2) <= 0xa9) return 3;
    if (c == 0xef && at(1) == 0xbb && at(2) == 0xbf) return 3;
    return 0;
}

unsigned code_point(std::string_view s, std::size_t i) {
    auto c = static_cast<unsigned char>(s[i]);
    auto next = [&](std::size_t k) { return i + k < s.size() ? static_cast<unsigned>(s[i + k]) & 0x3fu : 0u; };
    if (c == 0xc2) return 0x80u | next(1);
    if (c >= 0xe0 && c < 0xf0) return (c & 0x0fu) << 12 | next(1) << 6 | next(2);
    return c;
}
}  // namespace

std::string shell_quote(std::string_view word) {
    bool safe = !word.empty();
    for (char c : word) safe = safe && plain(c);
    // `=` is plain inside a word but makes a first word an assignment; `%` is harmless.
    if (safe) return std::string(word);
    std::string out = "'";
    for (char c : word) {
        if (c == '\'')
            out += "'\\''";
        else
            out += c;
    }
    return out + "'";
}

std::string shell_join(const std::vector<std::string>& argv) {
    std::string out;
    for (const auto& a : argv) out += (out.empty() ? "" : " ") + shell_quote(a);
    return out;
}

bool valid_name(std::string_view name) {
    return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
    });
}

std::string terminal_safe(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size();) {
        std::size_t n = s[i] == '\n' || s[i] == '\t' ? 0 : control_at(s, i);
        if (n == 0) {
            out += s[i++];
            continue;
        }
        out += n == 1 ? fmt::format("\\x{:02x}", code_point(s, i)) : fmt::format("\\u{:04x}", code_point(s, i));
        i += n;
    }
    return out;
}

std::optional<std::size_t> control_character(std::string_view s) {
    for (std::size_t i = 0; i < s.size(); ++i)
        if (s[i] != '\t' && control_at(s, i)) return i;
    return std::nullopt;
}

std::string describe_control(std::string_view s, std::size_t at) {
    unsigned cp = code_point(s, at);
    const char* name = cp == '\n'   ? " (a line feed)"
                       : cp == '\r' ? " (a carriage return)"
                       : cp == 0x1b ? " (escape)"
                       : cp == 0    ? " (a NUL byte)"
                                    : "";
    return fmt::format("U+{:04X}{}", cp, name);
}

std::vector<std::string> words(std::string_view s) {
    std::vector<std::string> out;
    std::size_t i = 0;
    while (i < s.size()) {
        while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
        std::size_t start = i;
        while (i < s.size() && !std::isspace(static_cast<unsigned char>(s[i]))) ++i;
        if (i > start) out.emplace_back(s.substr(start, i - start));
    }
    return out;
}

std::string tail_lines(const std::string& text, std::size_t lines) {
    std::vector<std::string> kept;
    std::size_t end = text.size();
    while (end > 0 && kept.size() < lines) {
        std::size_t start = text.rfind('\n', end - 1);
        std::size_t from = start == std::string::npos ? 0 : start + 1;
        std::string line = text.substr(from, end - from);
        while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
        if (!line.empty()) kept.insert(kept.begin(), line);
        if (start == std::string::npos) break;
        end = start;
    }
    return fmt::format("{}", fmt::join(kept, "; "));
}

}  // namespace wanlab::text
