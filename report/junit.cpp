// junit_xml(): assert outcomes as JUnit XML, the format CI systems (GitLab, Jenkins, GitHub
// test reporters) already display: one testsuite named after the experiment, one testcase
// per outcome, a <failure> carrying the outcome's message.
//
// A run that did not complete (interrupted or failed) adds one testcase with an <error>:
// its asserts were evaluated on partial data, and a pipeline must not go green on that.
#include <fmt/format.h>

#include "report/detail.h"

namespace wanlab::report {
namespace {

std::string xml(const std::string& s) { return detail::escape_markup(s); }

std::string property(const char* name, const std::string& value) {
    return fmt::format("      <property name=\"{}\" value=\"{}\"/>\n", name, xml(value));
}

}  // namespace

std::string junit_xml(const results::RunData& data, const std::vector<AssertOutcome>& outcomes) {
    const auto& run = data.run;
    bool partial = run.status == results::RunStatus::interrupted || run.status == results::RunStatus::failed;
    std::size_t failures = 0;
    for (const auto& o : outcomes) failures += o.passed ? 0 : 1;
    std::size_t tests = outcomes.size() + (partial ? 1 : 0), errors = partial ? 1 : 0;
    std::string suite = run.experiment.empty() ? "wanlab" : run.experiment;

    std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
    out += fmt::format("<testsuites name=\"wanlab\" tests=\"{}\" failures=\"{}\" errors=\"{}\">\n", tests, failures,
                       errors);
    out += fmt::format("  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"0\"", xml(suite),
                       tests, failures, errors);
    if (!run.started.empty()) out += fmt::format(" timestamp=\"{}\"", xml(run.started));
    if (!run.env.hostname.empty()) out += fmt::format(" hostname=\"{}\"", xml(run.env.hostname));
    out += ">\n    <properties>\n";
    out += property("run", run.id);
    out += property("status", to_string(run.status));
    out += property("file", run.file);
    out += property("baseline", detail::baseline_of(data));
    out += property("kernel", run.env.kernel);
    out += property("where", run.env.where);
    out += property("wanlab_version", run.env.wanlab_version);
    out += "    </properties>\n";
    if (partial) {
        std::string why = fmt::format("run {} is {}: partial results{}{}", run.id, run.status,
                                      run.error.empty() ? "" : ": ", run.error);
        out += fmt::format("    <testcase classname=\"{}\" name=\"run complete\">\n", xml(suite));
        out += fmt::format("      <error message=\"{}\" type=\"{}\">{}</error>\n", xml(why), xml(to_string(run.status)),
                           xml(why));
        out += "    </testcase>\n";
    }
    for (const auto& o : outcomes) {
        // The check in the name keeps two bounds of one assert apart: CI tools key on names.
        auto name = fmt::format("{} ({})", outcome_subject(o), check_name(o));
        out += fmt::format("    <testcase classname=\"{}\" name=\"{}\"", xml(suite), xml(name));
        out += ">\n";
        if (o.passed)  // the measured value, so a green gate still shows its margin
            out += fmt::format("      <system-out>{}</system-out>\n", xml(o.message));
        else
            out += fmt::format("      <failure message=\"{}\" type=\"{}\">{}</failure>\n", xml(o.message),
                               check_name(o), xml(o.message));
        out += "    </testcase>\n";
    }
    out += "  </testsuite>\n</testsuites>\n";
    return out;
}

}  // namespace wanlab::report
