// `wanlab plan FILE [--set KEY=VALUE]... [--json] [--shard K/N]`: the trials an experiment expands to and,
// for each, the tc and sysctl commands equivalent to what the lab will apply. Never touches
// the machine.
#include <cstdio>
#include <memory>

#include "cli/command.h"
#include "cli/load.h"
#include "experiment/plan.h"
#include "experiment/shard.h"
#include "run/shard.h"

namespace wanlab::cli {

Runner setup_plan(CLI::App& sub) {
    struct Options {
        std::string file;
        std::vector<std::string> sets;
        bool json = false;
        std::string shard;
    };
    auto o = std::make_shared<Options>();
    sub.add_option("FILE", o->file, "Experiment file (TOML)")->required();
    sub.add_option("--set", o->sets, "Override a key, e.g. --set link.delay=20ms (repeatable)")->type_name("KEY=VALUE");
    sub.add_flag("--json", o->json, "Print a JSON document (base units) instead of the table");
    sub.add_option("--shard", o->shard, "Only the trials `wanlab run --shard K/N` would measure")->type_name("K/N");
    return [o] {
        if (!o->shard.empty()) (void)experiment::parse_shard(o->shard);
        o->file = experiment_path(o->file);
        auto exp = load_or_throw(o->file, o->sets);
        std::size_t all = o->shard.empty() ? exp.trials.size() : run::keep_shard(exp, o->file, o->shard);
        if (o->json) {
            auto j = experiment::plan_json(exp);
            if (!o->shard.empty()) j["shard"] = {{"shard", o->shard}, {"trials", exp.trials.size()}, {"of", all}};
            std::fputs((j.dump(2) + "\n").c_str(), stdout);
        } else {
            if (!o->shard.empty())
                std::printf("Shard %s: %zu of the experiment's %zu trials (their # below is their place in the plan)\n",
                            o->shard.c_str(), exp.trials.size(), all);
            std::fputs(experiment::render_plan_text(exp).c_str(), stdout);
        }
        return 0;
    };
}

}  // namespace wanlab::cli
