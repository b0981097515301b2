// libFuzzer harness for the experiment loader: any bytes, with and without a --set, must
// load or produce diagnostics, never crash, hang or trip a sanitizer. Rendering the
// diagnostics is part of the target (carets, tabs, odd line endings).
#include <cstddef>
#include <cstdint>
#include <string>

#include "experiment/experiment.h"
#include "experiment/plan.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string text(reinterpret_cast<const char*>(data), size);
    // Bytes after a NUL, if any, become a --set argument, so overrides are fuzzed too.
    std::vector<std::string> sets;
    if (auto nul = text.find('\0'); nul != std::string::npos) {
        sets.push_back(text.substr(nul + 1));
        text.resize(nul);
    }
    wanlab::config::Documents docs;
    wanlab::Diagnostics diag;
    wanlab::experiment::ProfileLibrary profiles({WANLAB_FUZZ_PROFILES});
    auto exp = wanlab::experiment::load_experiment("fuzz.toml", text, sets, profiles, docs, diag);
    (void)diag.render(docs.sources());
    if (exp && exp->trials.size() <= 50) {
        (void)wanlab::experiment::render_plan_text(*exp);
        (void)wanlab::experiment::plan_json(*exp).dump();
    }
    return 0;
}
