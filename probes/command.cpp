// kind = "command": the user's own command, run once per repeat on the client host (its
// namespace) and timed from the start to its exit; further metrics read from what it
// printed (probes/output_match.h). A command that fails, times out or prints no value for a
// metric is that measurement's error (MeasurementError): the run goes on.
#include <chrono>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/process.h"
#include "core/text.h"
#include "probes/output_match.h"
#include "probes/probe.h"
#include "probes/sockets.h"

namespace wanlab::probes {
namespace {

constexpr std::size_t kTailLines = 5;

std::string output_note(const OutputMetric& m) {
    std::string source = m.json_pointer.empty() ? fmt::format("{} regex \"{}\"", m.stream, m.regex)
                                                : fmt::format("stdout JSON {}", m.json_pointer);
    return fmt::format("{}{}: {}, {} is better; from {} ({})", kOutputMetricNote, m.name, unit_name(m.unit),
                       m.higher_is_better ? "higher" : "lower", source, m.unit_text);
}

double read_metric(const OutputMetric& m, const sys::ProcessOutput& out) {
    const std::string& text = m.stream == "stderr" ? out.err : out.out;
    std::string why;
    std::optional<double> value;
    if (!m.json_pointer.empty()) {
        value = json_number(out.out, m.json_pointer, why);
    } else if (auto group = Pattern(m.regex).last_group(text, m.group)) {
        try {
            std::size_t used = 0;
            value = std::stod(*group, &used);
            if (used != group->size()) value.reset();
        } catch (const std::exception&) {}
        if (!value) why = fmt::format("its group `{}` matched \"{}\", which is not a number", m.group, *group);
    } else {
        why = fmt::format("the regex \"{}\" matched nothing in its {}", m.regex, m.stream);
    }
    if (!value) {
        auto tail = sys::tail_lines(text, kTailLines);
        throw MeasurementError(fmt::format("metric `{}`: {}{}", m.name, why,
                                           tail.empty()
                                               ? fmt::format(" (its {} was empty)", m.stream)
                                               : fmt::format("; its last lines: {}", text::terminal_safe(tail))));
    }
    return *value * m.scale;
}

}  // namespace

ProbeResult run_command(const ProbeSpec& spec, const Endpoints& where, const Tick& tick) {
    auto argv = spec.command;
    if (argv.empty()) throw InputError(fmt::format("probe `{}` has no command", spec.name));
    std::string program = argv[0];
    argv[0] = sys::find_program(program);
    if (argv[0].empty())
        throw InputError(fmt::format("probe `{}`: `{}` is not installed (not on PATH, nor in /usr/sbin or /sbin)",
                                     spec.name, program));
    auto timeout =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::nanoseconds(option_int(spec, "timeout")));
    auto start = Clock::now();
    sys::Process process(where.client.netns, argv);
    auto out = process.wait(timeout, tick);
    double wall = std::chrono::duration<double>(Clock::now() - start).count();
    auto shown = text::shell_join(spec.command);
    if (out.timed_out)
        throw MeasurementError(fmt::format("`{}` was still running after {} s: killed", shown,
                                           std::chrono::duration<double>(timeout).count()));
    if (!sys::exited_ok(out)) {
        auto tail = sys::tail_lines(out.err.empty() ? out.out : out.err, kTailLines);
        throw MeasurementError(fmt::format("`{}` {}{}", shown, sys::describe_status(out.status),
                                           tail.empty() ? "" : ": " + text::terminal_safe(tail)));
    }
    ProbeResult r;
    r.kind = "command";
    r.tool = "command";
    r.metrics["wall_time"] = wall;
    for (const auto& m : spec.outputs) {
        r.metrics[m.name] = read_metric(m, out);
        r.notes.push_back(output_note(m));
    }
    r.notes.push_back("command: " + text::shell_join(argv));
    return r;
}

}  // namespace wanlab::probes
