#include "cli/load.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/command.h"
#include "core/config.h"
#include "core/diagnostic.h"
#include "core/error.h"
#include "core/shipped.h"
#include "core/sys.h"
#include "core/text.h"
#include "experiment/profiles.h"
#include "lab/capabilities.h"
#include "lab/watchdog.h"
#include "netem/preflight.h"
#include "vm/vm.h"

namespace wanlab::cli {

std::vector<std::string> example_dirs() {
    std::vector<std::string> dirs;
    if (const char* extra = std::getenv("WANLAB_EXAMPLES"); extra && *extra) dirs.emplace_back(extra);
    for (auto& d : shipped::dirs("examples")) dirs.push_back(std::move(d));
    return dirs;
}

std::vector<std::string> example_names() {
    std::set<std::string> names;
    for (const auto& d : example_dirs()) {
        std::error_code ec;
        for (std::filesystem::directory_iterator it(d, ec), end; !ec && it != end; it.increment(ec))
            if (auto stem = it->path().stem().string();
                it->path().extension() == ".toml" && !stem.starts_with('.') && it->is_regular_file(ec))
                names.insert(stem);
    }
    return {names.begin(), names.end()};
}

std::string experiment_path(const std::string& arg) {
    std::error_code ec;
    if (arg.empty() || arg.find('/') != std::string::npos || std::filesystem::exists(arg, ec)) return arg;
    std::string name = arg.ends_with(".toml") ? arg.substr(0, arg.size() - 5) : arg;
    if (!name.empty() && !name.starts_with('.'))
        for (const auto& d : example_dirs()) {
            auto p = std::filesystem::path(d) / (name + ".toml");
            if (std::filesystem::is_regular_file(p, ec)) {
                std::fputs(fmt::format("wanlab: no file `{}` here: using the example {}\n", arg, p.string()).c_str(),
                           stderr);
                return p.string();
            }
        }
    auto names = example_names();
    throw InputError(
        fmt::format("experiment file {}: No such file or directory, and no example has that name{}", arg,
                    names.empty() ? fmt::format(" (none is installed: looked in {})", fmt::join(example_dirs(), ", "))
                                  : fmt::format("; the examples are: {}", fmt::join(names, ", "))));
}

experiment::Experiment load_or_throw(const std::string& path, const std::vector<std::string>& sets,
                                     std::string* text_out) {
    std::string text;
    try {
        text = sys::read_file(path, sys::kMaxInputBytes, "experiment file");
    } catch (const Error& e) {
        throw InputError(e.what());
    }
    if (text_out) *text_out = text;
    config::Documents docs;
    Diagnostics diag;
    auto exp = experiment::load_experiment(path, text, sets, experiment::ProfileLibrary::standard(), docs, diag);
    std::fputs(diag.render(docs.sources()).c_str(), stderr);
    if (!exp) {
        throw InputError(
            fmt::format("{} has {} error{}", path, diag.error_count(), diag.error_count() == 1 ? "" : "s"));
    }
    return *exp;
}

std::string start_services_for(lab::LabSession& session, const experiment::Trial& trial, const std::string& command,
                               const std::function<void()>& tick) {
    if (trial.services.empty()) return "";
    auto dir = sys::make_service_dir("wanlab-" + command, "the trial's services");
    session.start_services(trial, dir, tick);
    std::string names;
    for (const auto& s : trial.services) names += fmt::format("{}{} on {}", names.empty() ? "" : ", ", s.name, s.host);
    return fmt::format("services running: {}; their output and files: {}", names, dir);
}

void refuse_missing_qdiscs(const experiment::Experiment& exp, const std::string& file, const std::string& advice) {
    auto missing = lab::missing_qdiscs(exp);
    if (missing.empty()) return;
    bool host = !exp.trials.empty() && exp.trials.front().lab.mode == experiment::LabSpec::Mode::host;
    throw Error(fmt::format("this kernel lacks {} (needed by {}'s link conditions). {}{}", fmt::join(missing, ", "),
                            file, netem::advice_for(missing.front()), host || advice.empty() ? "" : "\n  " + advice),
                2);
}

int run_in_vm(const std::string& why, const std::vector<std::string>& argv, bool terminal, const std::string& out_dir) {
    std::fputs(fmt::format("wanlab: {}: running this in the micro-VM (--no-vm refuses instead)\n", why).c_str(),
               stderr);
    vm::VmOptions options;
    options.terminal = terminal;
    if (!out_dir.empty()) options.out_dir = out_dir;
    vm::Vm machine(options);
    return machine.run(argv).exit_status;
}

int rerun_in_vm(const std::string& why, bool terminal) {
    std::vector<std::string> argv{lab::self_exe()};
    const auto& line = command_line();
    auto dashdash = std::find(line.begin(), line.end(), "--");
    argv.insert(argv.end(), line.begin(), dashdash);
    argv.push_back("--no-vm");
    argv.insert(argv.end(), dashdash, line.end());
    return run_in_vm(why, argv, terminal);
}

bool on_terminal() { return ::isatty(0) == 1 && ::isatty(1) == 1; }

experiment::Experiment load_link_flags(const std::string& profile, const std::map<std::string, std::string>& values,
                                       const std::string& extra, const std::string& what) {
    std::string text = "[link]\n";
    if (!profile.empty()) text += "profile = " + toml_value(profile) + "\n";
    for (const auto& [k, v] : values) text += fmt::format("{} = {}\n", k, toml_value(v));
    text += extra;
    config::Documents docs;
    Diagnostics diag;
    auto exp =
        experiment::load_experiment("command line", text, {}, experiment::ProfileLibrary::standard(), docs, diag);
    std::fputs(diag.render(docs.sources()).c_str(), stderr);
    if (!exp) throw InputError(fmt::format("{} have errors (shown above as the [link] table they make)", what));
    return *exp;
}

std::string toml_value(const std::string& v) {
    bool number = !v.empty() && v.find_first_not_of("0123456789-") == std::string::npos && v != "-";
    if (number || v == "true" || v == "false") return v;
    std::string out = "\"";
    for (char c : v) out += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
    return out + "\"";
}

}  // namespace wanlab::cli
