// Text that crosses a trust boundary on its way out: a command a user will paste into a
// shell, a name from a file or a foreign database printed to a terminal.
//
// Contract: shell_quote() gives a word a POSIX shell reads back as exactly the input, with
// no expansion; terminal_safe() gives text that cannot move the cursor, change colours or
// set the window title, keeping newlines and tabs. control_character() finds what the
// experiment format refuses in strings. Pure functions, thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace wanlab::text {

/// Whether `name` is a name the experiment format gives things (probes, variants,
/// services): 1 to 64 letters, digits, `-` or `_`.
bool valid_name(std::string_view name);

/// `word` as one shell word: as it is when it holds only characters no shell treats
/// specially (letters, digits, `-_.,:/=@%+`), else in single quotes with each `'` as `'\''`.
std::string shell_quote(std::string_view word);

/// The words shell-quoted and joined by spaces: a command line that runs exactly `argv`.
std::string shell_join(const std::vector<std::string>& argv);

/// The last `lines` non-empty lines of `text`, joined by "; " (a program's error, for a message).
std::string tail_lines(const std::string& text, std::size_t lines = 5);

/// The whitespace-separated words of `s`, in order.
std::vector<std::string> words(std::string_view s);

/// `s` with every control character but newline and tab (C0, DEL, the C1 range U+0080-U+009F,
/// and the invisible zero-width, separator, bidi and BOM characters, in UTF-8) written as a
/// visible escape: "\x1b", "\u009b", "\u202e".
std::string terminal_safe(std::string_view s);

/// The byte offset of the first control character in `s` other than a tab (as terminal_safe()
/// escapes them), if any. Newlines count: no name, url or value wanlab reads spans lines.
std::optional<std::size_t> control_character(std::string_view s);

/// How a control character found by control_character() is named in a message: "U+000A
/// (a line feed)", "U+001B (escape)".
std::string describe_control(std::string_view s, std::size_t at);

}  // namespace wanlab::text
