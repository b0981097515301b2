// `wanlab validate FILE [--set KEY=VALUE]...`: exit 0 when the experiment is valid, 2 with
// located errors on stderr otherwise. Never touches the machine.
#include <algorithm>
#include <cstdio>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/command.h"
#include "cli/load.h"
#include "experiment/plan.h"

namespace wanlab::cli {

Runner setup_validate(CLI::App& sub) {
    struct Options {
        std::string file;
        std::vector<std::string> sets;
        bool quiet = false;
    };
    auto o = std::make_shared<Options>();
    sub.add_option("FILE", o->file, "Experiment file (TOML)")->required();
    sub.add_option("--set", o->sets, "Override a key, e.g. --set link.delay=20ms (repeatable)")->type_name("KEY=VALUE");
    sub.add_flag("-q,--quiet", o->quiet, "Print nothing on success");
    return [o] {
        o->file = experiment_path(o->file);
        auto exp = load_or_throw(o->file, o->sets);
        if (!o->quiet)
            std::fputs(fmt::format("{}: ok: {} trial{}, {} probe{}\n", o->file, exp.trials.size(),
                                   exp.trials.size() == 1 ? "" : "s", exp.trials.front().probes.size(),
                                   exp.trials.front().probes.size() == 1 ? "" : "s")
                           .c_str(),
                       stdout);
        // What the kernel will make of the probes' buffer asks, once per distinct note.
        std::vector<std::pair<std::string, std::vector<std::size_t>>> notes;
        for (const auto& t : exp.trials)
            for (const auto& c : experiment::buffer_clamps(t)) {
                auto it = std::find_if(notes.begin(), notes.end(), [&](const auto& n) { return n.first == c.text(); });
                if (it == notes.end()) it = notes.insert(notes.end(), {c.text(), {}});
                it->second.push_back(t.index);
            }
        for (const auto& [text, trials] : notes)
            if (!o->quiet)
                std::fputs(fmt::format("{}: note: trial{} {}: {}\n", o->file, trials.size() == 1 ? "" : "s",
                                       fmt::join(trials, ", "), text)
                               .c_str(),
                           stdout);
        return 0;
    };
}

}  // namespace wanlab::cli
