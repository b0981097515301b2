// `wanlab tune FILE`: searches the file's [tune.space] for the least change that reaches the
// best of its goal on its paths (tune/search.h), measuring each stage as a run of the file
// (tune/stages.h), and prints the recommendation with its evidence (tune/answer.h); in the
// micro-VM when this kernel lacks what the file's link needs, as `wanlab run` does.
#include <cstdio>
#include <filesystem>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/command.h"
#include "cli/load.h"
#include "core/error.h"
#include "core/sys.h"
#include "core/units.h"
#include "lab/capabilities.h"
#include "lab/session.h"
#include "lab/watchdog.h"
#include "run/launch.h"
#include "sysctl/proc_sys.h"
#include "tune/answer.h"
#include "tune/stages.h"

namespace wanlab::cli {
namespace {

struct TuneArgs {
    std::string file;
    std::vector<std::string> sets;
    std::string out = "wanlab-results";
    std::string format = "text";
    std::string write_sysctl, write_tuned, html;
    std::string resume;
    bool vm = false, no_vm = false, quiet = false;
};

std::string squeeze(std::string s) {
    for (char& c : s)
        if (c == '\t' || c == '\n') c = ' ';
    while (!s.empty() && s.back() == ' ') s.pop_back();
    std::string out;
    for (char c : s)
        if (!(c == ' ' && !out.empty() && out.back() == ' ')) out += c;
    return out;
}

// The largest number of a value ("4096 131072 6291456", "212992"); NaN for a word.
double largest(const std::string& v) {
    auto sizes = units::parse_sizes(v);
    return sizes ? static_cast<double>(*std::max_element(sizes->begin(), sizes->end())) : std::nan("");
}

// Each key's value as the measured machine or the file has it, and which of the key's
// values that is (kAsWritten: none of them, or unknown).
void as_written(const experiment::Experiment& exp, tune::Subject& s) {
    const auto& spec = *s.spec;
    sysctl::RealProcSys sys;
    static const std::vector<std::string> hosts{"client", "server", "router", "host"};
    for (const auto& key : spec.space) {
        std::string value;
        if (key.path.starts_with("sysctl.")) {
            // The file's [sysctl] where it sets the key (for that machine), else the machine's.
            std::string name = key.path.substr(7), host;
            for (const auto& h : hosts)
                if (name.starts_with(h + ".")) host = h, name = name.substr(h.size() + 1);
            const auto& spec = exp.trials.front().sysctl;
            std::vector<const sysctl::Setting*> set;
            for (const auto& g : spec.global) set.push_back(&g);
            if (auto it = spec.per_host.find(host.empty() ? "server" : host); it != spec.per_host.end())
                for (const auto& g : it->second) set.push_back(&g);
            for (const auto* g : set)
                if (g->key == name) value = squeeze(g->value);
            if (value.empty()) value = squeeze(sys.read("", name).value_or(""));
        } else if (key.path.starts_with("probe.") && key.path.ends_with(".congestion_control")) {
            const auto probe = key.path.substr(6, key.path.size() - 6 - std::string(".congestion_control").size());
            for (const auto& p : exp.trials.front().probes)
                if (p.name == probe)
                    if (auto it = p.options.find("congestion_control"); it != p.options.end())
                        if (const auto* v = std::get_if<std::string>(&it->second)) value = *v;
            if (value.empty()) value = squeeze(sys.read("", "net.ipv4.tcp_congestion_control").value_or(""));
        }
        int index = tune::kAsWritten;
        for (std::size_t i = 0; i < key.labels.size() && !value.empty(); ++i) {
            const bool same =
                squeeze(key.labels[i]) == value ||
                (!key.amounts.empty() && key.amounts[i] == largest(value) && value.find(' ') == std::string::npos);
            if (same) index = static_cast<int>(i);
        }
        s.written.push_back(value);
        s.as_written.push_back(index);
    }
}

// The tune in the micro-VM: the results folder is shared with it, and the files asked for
// are written there by the tune inside, then moved where they were asked for.
int tune_in_vm(const TuneArgs& a, const std::string& why) {
    namespace fs = std::filesystem;
    const fs::path out = fs::absolute(a.out);
    fs::create_directories(out);
    std::vector<std::string> argv{
        lab::self_exe(), "tune", fs::absolute(a.file).string(), "--out", out.string(), "--no-vm", "--format", a.format};
    for (const auto& s : a.sets) argv.insert(argv.end(), {"--set", s});
    if (a.quiet) argv.push_back("--quiet");
    if (!a.resume.empty()) argv.insert(argv.end(), {"--resume", a.resume});
    struct Handoff {
        const char* flag;
        std::string wanted;
        fs::path inside;
    };
    std::vector<Handoff> files{{"--write-sysctl", a.write_sysctl, out / ".tune-handoff.conf"},
                               {"--html", a.html, out / ".tune-handoff.html"},
                               {"--write-tuned", a.write_tuned, out / ".tune-handoff-tuned"}};
    for (const auto& f : files) {
        fs::remove_all(f.inside);
        if (!f.wanted.empty()) argv.insert(argv.end(), {f.flag, f.inside.string()});
    }
    int status = cli::run_in_vm(why, argv, false, out.string());
    for (const auto& f : files) {
        if (f.wanted.empty() || !fs::exists(f.inside)) continue;
        if (fs::is_directory(f.inside)) {
            fs::create_directories(f.wanted);
            fs::copy(f.inside, f.wanted, fs::copy_options::overwrite_existing | fs::copy_options::recursive);
        } else {
            sys::write_file_atomic(f.wanted, sys::read_file(f.inside.string(), sys::kMaxInputBytes, f.flag), f.flag);
        }
        fs::remove_all(f.inside);
    }
    return status;
}

int tune(TuneArgs a) {
    if (a.vm && a.no_vm) throw InputError("--vm and --no-vm contradict each other; give one");
    if (a.format != "text" && a.format != "json") throw InputError("--format: text or json");
    for (const auto& [flag, path] : {std::pair{"--write-sysctl", a.write_sysctl}, std::pair{"--html", a.html}})
        if (!path.empty())
            if (auto why = sys::cannot_create(path); !why.empty())
                throw InputError(fmt::format("{} {}: cannot write there: {}", flag, path, why));
    a.file = experiment_path(a.file);
    std::string text = sys::read_file(a.file, sys::kMaxInputBytes, "experiment file");
    config::Documents docs;
    Diagnostics diag;
    auto exp = experiment::load_experiment(a.file, text, a.sets, experiment::ProfileLibrary::standard(), docs, diag);
    std::fputs(diag.render(docs.sources()).c_str(), stderr);
    if (!exp) throw InputError(fmt::format("{}: not tuned: fix the errors above", a.file));
    if (!exp->tune)
        throw InputError(
            fmt::format("{} has no [tune] section: say what to improve and what to try: add [tune] "
                        "goal = \"PROBE.METRIC\" and [tune.space] with the keys and their values "
                        "(docs/tune.md)",
                        a.file));
    run::RunRequest where;
    where.file = a.file;
    where.vm = a.vm, where.no_vm = a.no_vm;
    auto machine = run::this_machine(*exp);
    auto place = run::choose_place(*exp, where, machine);
    if (place.place == run::Place::micro_vm) {
        auto missing = a.vm ? std::vector<std::string>{} : machine.missing_qdiscs();
        return tune_in_vm(a, a.vm               ? std::string("--vm")
                             : !missing.empty() ? fmt::format("this kernel has no {}", fmt::join(missing, ", "))
                                                : std::string("no root here, and the micro-VM needs none"));
    }
    lab::require_capabilities("wanlab tune");

    tune::Subject s;
    s.spec = &*exp->tune;
    s.file = a.file;
    s.id = a.resume.empty() ? "t" + lab::new_run_id() : a.resume;
    lab::check_run_id(s.id + "-s99");
    as_written(*exp, s);
    for (const auto& t : exp->trials) {
        std::string point;
        for (const auto& [k, v] : t.sweep) point += (point.empty() ? "" : " ") + k + "=" + v;
        s.paths.push_back(point.empty() ? "[link]" : point);
    }
    tune::StageRunner stages({a.file, text, a.sets, a.out, s.id, a.quiet}, *exp->tune);
    tune::SearchOptions options;
    options.paths = s.paths.size();
    options.full_duration = exp->run.duration;
    options.overhead = std::chrono::duration<double>(exp->run.warmup + exp->run.cooldown).count() + 2;
    std::fprintf(stderr, "wanlab tune %s: %s (resume with --resume %s)\n", a.file.c_str(), s.id.c_str(), s.id.c_str());
    auto outcome = tune::search(*exp->tune, s.as_written, options, std::ref(stages));
    s.runs = stages.runs();

    auto j = tune::answer_json(outcome, s);
    sys::write_file_atomic((std::filesystem::path(a.out) / fmt::format("tune-{}.json", s.id)).string(),
                           j.dump(2) + "\n", "the tune's record");
    if (a.format == "json")
        std::fputs((j.dump(2) + "\n").c_str(), stdout);
    else
        std::fputs(tune::answer_text(outcome, s).c_str(), stdout);
    if (!a.html.empty()) sys::write_file_atomic(a.html, tune::answer_page(outcome, s), "the page");
    if (!a.write_sysctl.empty()) {
        auto dropin = tune::sysctl_dropin(outcome, s);
        if (dropin.empty())
            std::fprintf(stderr, "--write-sysctl: the recommendation changes no sysctl; %s not written\n",
                         a.write_sysctl.c_str());
        else
            sys::write_file_atomic(a.write_sysctl, dropin, "the sysctl drop-in");
    }
    if (!a.write_tuned.empty()) {
        auto profile = tune::tuned_profile(outcome, s);
        if (profile.empty()) {
            std::fprintf(stderr, "--write-tuned: the recommendation changes no sysctl; %s not written\n",
                         a.write_tuned.c_str());
        } else {
            std::filesystem::create_directories(a.write_tuned);
            sys::write_file_atomic((std::filesystem::path(a.write_tuned) / "tuned.conf").string(), profile,
                                   "the tuned profile");
        }
    }
    return 0;
}

}  // namespace

Runner setup_tune(CLI::App& sub) {
    auto a = std::make_shared<TuneArgs>();
    sub.add_option("FILE", a->file, "Experiment file with a [tune] section")->required();
    sub.add_option("--set", a->sets, "Override a key, e.g. --set link.rtt=80ms (repeatable)")->type_name("KEY=VALUE");
    sub.add_option("--out", a->out, "Results folder: each stage is a run in its results.db")->type_name("DIR");
    sub.add_option("--format", a->format, "text or json")->type_name("FORMAT");
    sub.add_option("--write-sysctl", a->write_sysctl, "Write the recommendation as a sysctl.d drop-in")
        ->type_name("FILE");
    sub.add_option("--write-tuned", a->write_tuned, "Write the recommendation as a tuned profile (DIR/tuned.conf)")
        ->type_name("DIR");
    sub.add_option("--html", a->html, "Write the answer and the search as a page")->type_name("FILE");
    sub.add_option("--resume", a->resume, "Continue a tune by its id: finished stages are read, not measured")
        ->type_name("ID");
    sub.add_flag("--vm", a->vm, "Run in the micro-VM");
    sub.add_flag("--no-vm", a->no_vm, "Never move to the micro-VM");
    sub.add_flag("--quiet", a->quiet, "No progress lines");
    return [a] { return tune(*a); };
}

}  // namespace wanlab::cli
