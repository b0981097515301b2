#include "cli/load.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/error.h"
#include "core/sys.h"

namespace wanlab::cli {

lab::Experiment load_or_throw(const std::string& path, const std::vector<std::string>& sets, std::string* text_out) {
    std::string text;
    try {
        text = sys::read_file(path, sys::kMaxInputBytes, "experiment file");
    } catch (const Error& e) {
        throw InputError(e.what());
    }
    if (text_out) *text_out = text;
    config::Documents docs;
    Diagnostics diag;
    auto exp = lab::load_experiment(path, text, sets, lab::ProfileLibrary::standard(), docs, diag);
    std::fputs(diag.render(docs.sources()).c_str(), stderr);
    if (!exp) {
        throw InputError(
            fmt::format("{} has {} error{}", path, diag.error_count(), diag.error_count() == 1 ? "" : "s"));
    }
    return *exp;
}

std::string toml_value(const std::string& v) {
    bool number = !v.empty() && v.find_first_not_of("0123456789-") == std::string::npos && v != "-";
    if (number || v == "true" || v == "false") return v;
    std::string out = "\"";
    for (char c : v) out += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
    return out + "\"";
}

}  // namespace wanlab::cli
