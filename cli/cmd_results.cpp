// `wanlab results list|show|merge|sysctl` and `wanlab compare`: reading the results database a run wrote
// (results/store.h) and reporting from it (report/report.h), without measuring.
#include <fcntl.h>
#include <unistd.h>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "cli/command.h"
#include "core/error.h"
#include "core/json.h"
#include "core/sys.h"
#include "core/text.h"
#include "experiment/experiment.h"
#include "lab/session.h"
#include "report/report.h"
#include "results/merge.h"
#include "results/store.h"

namespace wanlab::cli {
namespace {

namespace fs = std::filesystem;

/// The results database in `out`, opened read-only: reading never creates or changes it.
std::unique_ptr<results::Store> database(const std::string& out) {
    auto db = fs::path(out) / "results.db";
    std::error_code ec;
    if (fs::symlink_status(db, ec).type() == fs::file_type::not_found)
        throw InputError(
            fmt::format("no results database {} (give the folder `wanlab run --out` wrote with --out)", db.string()));
    return std::make_unique<results::Store>(db, results::Store::Access::read_only);
}

/// The run's experiment, re-read from the text stored with it; none (and a warning) when it
/// no longer loads, e.g. a profile it named is gone.
std::optional<experiment::Experiment> stored_experiment(const results::Run& run) {
    config::Documents docs;
    Diagnostics diag;
    auto exp =
        experiment::load_experiment(run.file, run.text, run.sets, experiment::ProfileLibrary::standard(), docs, diag);
    if (!exp)
        std::fputs(
            fmt::format("wanlab: warning: the stored experiment of run {} no longer loads; asserts not shown\n", run.id)
                .c_str(),
            stderr);
    return exp;
}

/// The asserts of the run's experiment (stored_experiment()).
std::vector<experiment::AssertSpec> stored_asserts(const results::Run& run) {
    auto exp = stored_experiment(run);
    return exp ? exp->asserts : std::vector<experiment::AssertSpec>{};
}

struct ListArgs {
    std::string out = "wanlab-results";
};
struct ShowArgs {
    std::string out = "wanlab-results";
    std::string run = "latest";
    std::string format = "table";
    std::string pivot;
    std::string export_as;
};
struct MergeArgs {
    std::vector<std::string> inputs;
    std::string out;
    std::string run_id;
    std::string format = "table";
    bool force = false;
};
struct SysctlArgs {
    std::string out = "wanlab-results";
    std::string run = "latest";
    std::string variant, point, host, output;
    bool force = false;
};
struct CompareArgs {
    std::string out = "wanlab-results";
    std::string other;
    std::string a, b;
    std::string format = "table";
};

int list(const ListArgs& a) {
    auto store = database(a.out);
    auto runs = store->list_runs();
    if (runs.empty()) {
        std::printf("no runs in %s\n", store->path().c_str());
        return 0;
    }
    std::printf("%-10s %-21s %-12s %-8s %-24s %s\n", "run", "started", "status", "trials", "experiment", "where");
    // A database can come from another machine: what it says reaches the terminal escaped.
    for (const auto& r : runs)
        std::fputs(text::terminal_safe(fmt::format("{:<10} {:<21} {:<12} {:<8} {:<24} {}\n", r.id, r.started, r.status,
                                                   r.planned_trials, r.experiment, r.env.where))
                       .c_str(),
                   stdout);
    return 0;
}

/// A report on stdout. Text formats never carry a foreign database's control characters to a
/// terminal; a page is written as it is (its scripts must stay intact; its text from the
/// database is escaped for HTML) unless stdout is a terminal.
void print_report(const std::string& text, report::Format format) {
    bool raw = format == report::Format::html && !::isatty(STDOUT_FILENO);
    std::fputs((raw ? text : text::terminal_safe(text)).c_str(), stdout);
}

int show(const ShowArgs& a) {
    auto data = database(a.out)->load_run(a.run);
    if (a.export_as == "json") {
        std::puts(json_input::dump(results::to_json(data), 2).c_str());
        return 0;
    }
    if (a.export_as == "csv") {
        std::string csv = results::to_csv(data);
        std::fputs((::isatty(STDOUT_FILENO) ? text::terminal_safe(csv) : csv).c_str(), stdout);
        return 0;
    }
    report::ReportOptions ro;
    ro.format = report::parse_format(a.format);
    ro.pivot = a.pivot;
    ro.files_root = a.out;
    print_report(report::render(data, stored_asserts(data.run), ro), ro.format);
    return 0;
}

/// `text` into a new file `path`: never through a symbolic link planted there (O_NOFOLLOW), never
/// over an existing file unless `force` (O_EXCL), never half-written without an error.
void write_new_file(const std::string& path, const std::string& text, bool force) {
    auto refuse_link = [&path] {
        throw InputError(
            fmt::format("--output {}: a symbolic link; wanlab does not write through one (remove it, or give "
                        "another path)",
                        path));
    };
    std::error_code ec;
    if (fs::symlink_status(path, ec).type() == fs::file_type::symlink) refuse_link();
    int flags = O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | (force ? O_TRUNC : O_EXCL);
    sys::Fd fd(::open(path.c_str(), flags, 0644));
    if (!fd && errno == ELOOP) refuse_link();  // planted since the check above
    if (!fd && errno == EEXIST)
        throw InputError(fmt::format("--output {}: the file exists; give --force to overwrite it", path));
    if (!fd) sys::fail_errno("writing " + path);
    for (std::size_t done = 0; done < text.size();) {
        auto n = ::write(fd.get(), text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) sys::fail_errno("writing " + path);
        done += static_cast<std::size_t>(n);
    }
}

int sysctl_conf(const SysctlArgs& a) {
    auto data = database(a.out)->load_run(a.run);
    auto choice = report::trial_for(data, a.variant, a.point, a.host);
    if (!choice.note.empty()) std::fputs(text::terminal_safe("wanlab: " + choice.note + "\n").c_str(), stderr);
    auto text = report::sysctl_dropin(data, *choice.trial, a.host);
    if (a.output.empty()) {
        std::fputs((::isatty(STDOUT_FILENO) ? text::terminal_safe(text) : text).c_str(), stdout);
        return 0;
    }
    write_new_file(a.output, text, a.force);
    std::fputs(text::terminal_safe(fmt::format("wanlab: wrote {} (trial {}, variant {})\n", a.output,
                                               choice.trial->index, choice.trial->variant))
                   .c_str(),
               stderr);
    return 0;
}

/// "FOLDER" (its latest run) or "FOLDER@RUN" as `results merge` takes them.
results::MergeInput merge_input(const std::string& arg) {
    std::string folder = arg, run = "latest";
    std::error_code ec;
    if (auto at = arg.rfind('@'); at != std::string::npos && !fs::exists(arg, ec)) {
        folder = arg.substr(0, at);
        run = arg.substr(at + 1);
    }
    if (fs::path(folder).filename() == "results.db") folder = fs::path(folder).parent_path().string();
    if (folder.empty()) folder = ".";
    return {folder, database(folder)->load_run(run)};
}

int merge(const MergeArgs& a) {
    (void)report::parse_format(a.format);
    std::vector<results::MergeInput> inputs;
    for (const auto& arg : a.inputs) inputs.push_back(merge_input(arg));
    results::MergeOptions mo;
    mo.run_id = a.run_id.empty() ? lab::new_run_id() : a.run_id;
    mo.force = a.force;
    std::vector<std::string> notes;
    auto merged = results::merge_runs(inputs, mo, &notes);
    for (const auto& n : notes) std::fputs(text::terminal_safe("wanlab: " + n + "\n").c_str(), stderr);
    // The whole experiment's trial count, so a missing shard shows as trials not done.
    auto exp = stored_experiment(merged.run);
    if (exp) merged.run.planned_trials = std::max(merged.run.planned_trials, exp->trials.size());
    fs::create_directories(a.out);
    results::Store store(fs::path(a.out) / "results.db");
    store.begin_run(merged.run, merged.trials);
    for (const auto& m : merged.measurements) store.add_measurement(merged.run.id, m);
    std::size_t done = 0;
    for (const auto& t : merged.trials) done += t.status == results::TrialStatus::done;
    std::fputs(text::terminal_safe(fmt::format("wanlab: merged {} runs into run {} in {}: {} of {} trials done\n",
                                               inputs.size(), merged.run.id, store.path().string(), done,
                                               merged.run.planned_trials))
                   .c_str(),
               stderr);
    report::ReportOptions ro;
    ro.format = report::parse_format(a.format);
    ro.files_root = a.out;
    auto asserts = exp ? exp->asserts : std::vector<experiment::AssertSpec>{};
    print_report(report::render(merged, asserts, ro), ro.format);
    for (const auto& o : report::evaluate(merged, asserts))
        if (!o.passed) return 3;
    return 0;
}

int compare(const CompareArgs& a) {
    auto store = database(a.out);
    auto first = store->load_run(a.a);
    auto second = a.other.empty() ? store->load_run(a.b) : database(a.other)->load_run(a.b);
    if (first.run.experiment != second.run.experiment)
        std::fputs(text::terminal_safe(fmt::format("wanlab: warning: comparing different experiments ({} and {}); only "
                                                   "trials with the same id are compared\n",
                                                   first.run.experiment, second.run.experiment))
                       .c_str(),
                   stderr);
    auto format = report::parse_format(a.format);
    print_report(report::render_comparison(first, second, format), format);
    return 0;
}

}  // namespace

Runner setup_results(CLI::App& sub) {
    sub.require_subcommand(1);
    auto l = std::make_shared<ListArgs>();
    auto s = std::make_shared<ShowArgs>();
    CLI::App* list_cmd = sub.add_subcommand("list", "Every run in the results database, newest first");
    list_cmd->add_option("--out", l->out, "Folder holding results.db (default: ./wanlab-results)");
    CLI::App* show_cmd =
        sub.add_subcommand("show", "The report of one run (before/after, pivot, explanations, asserts)");
    show_cmd->add_option("RUN", s->run, "Run id, a unique prefix of one, or `latest` (default)");
    show_cmd->add_option("--out", s->out, "Folder holding results.db (default: ./wanlab-results)");
    show_cmd->add_option("--format", s->format, "table, csv, json, markdown, html (one page with charts)")
        ->check(CLI::IsMember({"table", "csv", "json", "markdown", "html"}));
    show_cmd->add_option("--pivot", s->pivot, "Metric of the sweep pivot (probe.metric)");
    show_cmd->add_option("--export", s->export_as, "Every measurement and sample instead of the report: json or csv")
        ->check(CLI::IsMember({"json", "csv"}));
    auto m = std::make_shared<MergeArgs>();
    CLI::App* merge_cmd = sub.add_subcommand(
        "merge", "Runs of one experiment (shards, an interrupted run and its rest) as one run with one report");
    merge_cmd->add_option("RESULTS", m->inputs, "Results folders (their latest run) or FOLDER@RUN, two or more")
        ->required();
    merge_cmd->add_option("--out", m->out, "Folder of the results.db the merged run is added to")->required();
    merge_cmd->add_option("--run", m->run_id, "The merged run's id (default: random)");
    merge_cmd->add_option("--format", m->format, "table, csv, json, markdown, html (one page with charts)")
        ->check(CLI::IsMember({"table", "csv", "json", "markdown", "html"}));
    merge_cmd->add_flag("--force", m->force,
                        "Merge runs of different experiment texts, keeping the first run's copy of a trial measured "
                        "twice");
    auto c = std::make_shared<SysctlArgs>();
    CLI::App* sysctl_cmd = sub.add_subcommand(
        "sysctl", "The sysctls of one measured configuration (a variant at a sweep point) as a sysctl.d file");
    sysctl_cmd->add_option("RUN", c->run, "Run id, a unique prefix of one, or `latest` (default)");
    sysctl_cmd->add_option("--out", c->out, "Folder holding results.db (default: ./wanlab-results)");
    sysctl_cmd->add_option("--variant", c->variant, "The variant whose sysctls are written")->required();
    sysctl_cmd->add_option("--point", c->point,
                           "The sweep point, as the report labels it (link.rtt=40ms) or a unique part of it "
                           "(40ms); needed when the run has several");
    sysctl_cmd->add_option("--host", c->host,
                           "The lab host (client, server, router) whose own sysctls are written beside the global "
                           "ones (default: global ones, each host's commented out)");
    sysctl_cmd->add_option("--output,-o", c->output,
                           "Write to this new file instead of stdout (never through a symbolic link)");
    sysctl_cmd->add_flag("--force", c->force, "Overwrite --output when it exists");
    sysctl_cmd->footer(
        "Example:\n"
        "  wanlab results sysctl latest --variant large-buffers --point 40ms -o 90-wanlab.conf\n"
        "  sudo install -m 644 90-wanlab.conf /etc/sysctl.d/ && sudo sysctl --system\n"
        "Each key says where its value came from and what the trial measured; the header names the\n"
        "run, the trial, and the kernel it was measured on (with a warning when that was the micro-VM's).");
    return [l, s, m, c, list_cmd, merge_cmd, sysctl_cmd] {
        if (list_cmd->parsed()) return list(*l);
        if (merge_cmd->parsed()) return merge(*m);
        if (sysctl_cmd->parsed()) return sysctl_conf(*c);
        return show(*s);
    };
}

Runner setup_compare(CLI::App& sub) {
    auto c = std::make_shared<CompareArgs>();
    sub.add_option("RUN_A", c->a, "The reference run (id, prefix or `latest`)")->required();
    sub.add_option("RUN_B", c->b, "The run compared with it")->required();
    sub.add_option("--out", c->out, "Folder holding RUN_A's results.db (default: ./wanlab-results)");
    sub.add_option("--other", c->other, "Folder holding RUN_B's results.db, when it is another one (another machine)");
    sub.add_option("--format", c->format, "table, csv, json, markdown, html (one page with charts)")
        ->check(CLI::IsMember({"table", "csv", "json", "markdown", "html"}));
    return [c] { return compare(*c); };
}

}  // namespace wanlab::cli
