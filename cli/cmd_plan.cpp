// `wanlab plan FILE [--set KEY=VALUE]... [--json]`: the trials an experiment expands to and,
// for each, the tc and sysctl commands equivalent to what the lab will apply. Never touches
// the machine.
#include <cstdio>
#include <memory>

#include "cli/command.h"
#include "cli/load.h"
#include "experiment/plan.h"

namespace wanlab::cli {

Runner setup_plan(CLI::App& sub) {
    struct Options {
        std::string file;
        std::vector<std::string> sets;
        bool json = false;
    };
    auto o = std::make_shared<Options>();
    sub.add_option("FILE", o->file, "Experiment file (TOML)")->required();
    sub.add_option("--set", o->sets, "Override a key, e.g. --set link.delay=20ms (repeatable)")->type_name("KEY=VALUE");
    sub.add_flag("--json", o->json, "Print a JSON document (base units) instead of the table");
    return [o] {
        auto exp = load_or_throw(o->file, o->sets);
        if (o->json)
            std::fputs((lab::plan_json(exp).dump(2) + "\n").c_str(), stdout);
        else
            std::fputs(lab::render_plan_text(exp).c_str(), stdout);
        return 0;
    };
}

}  // namespace wanlab::cli
