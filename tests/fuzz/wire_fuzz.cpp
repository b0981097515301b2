// libFuzzer harness for the JSON that crosses a trust boundary (issue 40): what an agent reads
// from its controller (a service, a probe, link directions, a flow), what a controller reads
// from an agent (a far server's report, a probe's result), and a results record as an export
// or another machine's database carries it. Any bytes must be refused or read, never crash,
// hang or trip a sanitizer.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string_view>

#include "core/json.h"
#include "remote/protocol.h"
#include "results/store.h"

namespace {

template <typename F>
void tolerate(F&& f) {
    try {
        f();
    } catch (const std::exception&) {
        // a refusal is an answer
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string_view text(reinterpret_cast<const char*>(data), size);
    auto j = wanlab::json_input::parse(text);
    if (j.is_discarded()) return 0;
    (void)wanlab::json_input::dump(j, 2);
    tolerate([&] { (void)wanlab::remote::service_of(j); });
    tolerate([&] { (void)wanlab::remote::probe_of(j); });
    tolerate([&] { (void)wanlab::remote::direction_of(j); });
    tolerate([&] { (void)wanlab::remote::flow_of(j); });
    tolerate([&] { (void)wanlab::remote::far_report_of(j); });
    tolerate([&] {
        auto run = wanlab::results::from_json(j);
        (void)wanlab::json_input::dump(wanlab::results::to_json(run));
        (void)wanlab::results::to_csv(run);
    });
    return 0;
}
