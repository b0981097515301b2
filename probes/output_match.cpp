#include "probes/output_match.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <chrono>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json.h"

namespace wanlab::probes {
namespace {

// Enough for any sane pattern over a program's output; a catastrophic one stops here.
constexpr std::uint32_t kMatchLimit = 10'000'000;
constexpr std::uint32_t kDepthLimit = 10'000;

std::string pcre2_message(int code) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(code, buf, sizeof buf);
    return reinterpret_cast<const char*>(buf);
}

}  // namespace

struct Pattern::Compiled {
    pcre2_code* code = nullptr;
    pcre2_match_context* context = nullptr;
    ~Compiled() {
        pcre2_match_context_free(context);
        pcre2_code_free(code);
    }
};

Pattern::Pattern(const std::string& pattern) : c_(std::make_unique<Compiled>()) {
    int code = 0;
    PCRE2_SIZE offset = 0;
    c_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_MULTILINE,
                             &code, &offset, nullptr);
    if (!c_->code) throw InputError(fmt::format("regex \"{}\" at offset {}: {}", pattern, offset, pcre2_message(code)));
    c_->context = pcre2_match_context_create(nullptr);
    if (!c_->context) throw Error("regex: out of memory");
    pcre2_set_match_limit(c_->context, kMatchLimit);
    pcre2_set_depth_limit(c_->context, kDepthLimit);
}

Pattern::~Pattern() = default;
Pattern::Pattern(Pattern&&) noexcept = default;
Pattern& Pattern::operator=(Pattern&&) noexcept = default;

std::vector<std::string> Pattern::group_names() const {
    std::uint32_t count = 0, entry = 0;
    PCRE2_SPTR table = nullptr;
    pcre2_pattern_info(c_->code, PCRE2_INFO_NAMECOUNT, &count);
    pcre2_pattern_info(c_->code, PCRE2_INFO_NAMEENTRYSIZE, &entry);
    pcre2_pattern_info(c_->code, PCRE2_INFO_NAMETABLE, &table);
    // Each entry: the group number (2 bytes, big-endian), then the NUL-terminated name.
    std::vector<std::pair<int, std::string>> named;
    for (std::uint32_t i = 0; i < count; ++i) {
        PCRE2_SPTR e = table + i * entry;
        named.emplace_back((e[0] << 8) | e[1], reinterpret_cast<const char*>(e + 2));
    }
    std::sort(named.begin(), named.end());
    std::vector<std::string> names;
    for (auto& [n, name] : named) names.push_back(std::move(name));
    return names;
}

// The whole extraction has a budget (`budget`): the limits above bound one pcre2_match(), but a
// pattern that matches at every position calls it once per position.
std::optional<std::string> Pattern::last_group(std::string_view subject, const std::string& group,
                                               std::chrono::milliseconds budget) const {
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(c_->code, nullptr);
    if (!md) throw Error("regex: out of memory");
    std::optional<std::string> found;
    PCRE2_SIZE start = 0;
    const auto deadline = std::chrono::steady_clock::now() + budget;
    for (std::uint64_t matches = 0; start <= subject.size(); ++matches) {
        if (std::chrono::steady_clock::now() > deadline) {
            pcre2_match_data_free(md);
            throw Error(
                fmt::format("regex: still matching after {} ms ({} matches in {} bytes of output): make the "
                            "pattern match the number's line only",
                            budget.count(), matches, subject.size()));
        }
        int rc = pcre2_match(c_->code, reinterpret_cast<PCRE2_SPTR>(subject.data()), subject.size(), start, 0, md,
                             c_->context);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            pcre2_match_data_free(md);
            throw Error(fmt::format("regex: {}", pcre2_message(rc)));
        }
        PCRE2_UCHAR* text = nullptr;
        PCRE2_SIZE length = 0;
        if (pcre2_substring_get_byname(md, reinterpret_cast<PCRE2_SPTR>(group.c_str()), &text, &length) == 0) {
            found = std::string(reinterpret_cast<const char*>(text), length);
            pcre2_substring_free(text);
        }
        PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        start = ov[1] > ov[0] ? ov[1] : ov[1] + 1;  // an empty match moves on by one
    }
    pcre2_match_data_free(md);
    return found;
}

bool valid_json_pointer(const std::string& pointer, std::string& why) {
    try {
        nlohmann::json::json_pointer p(pointer);
        return true;
    } catch (const nlohmann::json::exception& e) {
        why = e.what();
        return false;
    }
}

std::optional<double> json_number(const std::string& text, const std::string& pointer, std::string& why) {
    auto doc = json_input::parse(text);
    if (doc.is_discarded()) {
        auto end = text.find_last_not_of(" \t\r\n");
        auto start = end == std::string::npos ? std::string::npos : text.rfind('\n', end);
        std::string last = end == std::string::npos ? "" : text.substr(start == std::string::npos ? 0 : start + 1);
        doc = json_input::parse(last);
        if (doc.is_discarded()) {
            why = "its output is not JSON (nor is its last line)";
            return std::nullopt;
        }
    }
    nlohmann::json::json_pointer p(pointer);
    if (!doc.contains(p)) {
        why = fmt::format("its JSON has nothing at {}", pointer);
        return std::nullopt;
    }
    const auto& v = doc.at(p);
    if (!v.is_number()) {
        why = fmt::format("its JSON holds {} at {}, not a number", v.type_name(), pointer);
        return std::nullopt;
    }
    return v.get<double>();
}

}  // namespace wanlab::probes
