// `wanlab doctor [FILE] [--json]`: everything wanlab needs from this machine, checked without
// changing it: kernel, capabilities, congestion controls (and which a namespace may choose),
// qdiscs and devices (tried in a scratch namespace), the micro-VM, the external tools with
// their versions, and /run/wanlab's journals. With an experiment file, one verdict per thing
// that file needs, and whether `wanlab run FILE` can run here (exit 1 when it cannot).
#include <sys/utsname.h>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/load.h"
#include "core/error.h"
#include "core/process.h"
#include "core/text.h"
#include "core/tools.h"
#include "lab/capabilities.h"
#include "lab/journal.h"
#include "lab/session.h"
#include "netem/preflight.h"
#include "probes/probe.h"
#include "vm/files.h"
#include "vm/initramfs.h"
#include "vm/modules.h"
#include "vm/vm.h"

namespace wanlab::cli {
namespace {

using nlohmann::json;

std::string read_line(const std::string& path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return line;
}

using Tool = sys::KnownTool;  // the one table of tools and packages: core/tools.h

/// The tools doctor lists: those with a use of their own.
std::vector<const Tool*> listed_tools() {
    std::vector<const Tool*> out;
    for (const auto& t : sys::known_tools())
        if (*t.use) out.push_back(&t);
    return out;
}

/// The tool's path ("" when missing) and the first line it prints about its version.
std::pair<std::string, std::string> tool_version(const Tool& t) {
    auto path = sys::find_program(t.name);
    if (path.empty()) return {"", ""};
    std::vector<std::string> argv{path};
    if (*t.version_flag) argv.emplace_back(t.version_flag);
    std::string said;
    try {
        sys::Process p("", argv);
        auto o = p.wait(std::chrono::seconds(3), {});
        said = o.out.empty() ? o.err : o.out;
    } catch (const std::exception&) {
        return {path, ""};
    }
    std::istringstream in(said);
    for (std::string l; std::getline(in, l);) {
        auto b = l.find_first_not_of(" \t\r"), e = l.find_last_not_of(" \t\r");
        if (b != std::string::npos) return {path, l.substr(b, std::min<std::size_t>(e - b + 1, 100))};
    }
    return {path, ""};
}

std::vector<std::string> words_of(const std::string& line) {
    std::vector<std::string> out;
    std::istringstream in(line);
    for (std::string w; in >> w;) out.push_back(w);
    return out;
}

/// What doctor found out about the machine, shared by the text, the JSON and the FILE checks.
struct Here {
    bool net_admin = false, sys_admin = false;
    std::vector<std::string> cc_available, cc_allowed;
    std::string cc_default;
    std::vector<netem::Feature> features;
    std::string features_error;
    std::vector<std::string> vm_missing;
    std::string vm_kernel, vm_accel;
    std::string vm_version;  ///< the micro-VM kernel's release ("6.1.0-41-amd64")
    vm::Offered vm_offered;  ///< what its kernel offers as the micro-VM boots it

    bool can_change() const { return net_admin && sys_admin; }
    bool has_feature(const std::string& name) const {
        return std::any_of(features.begin(), features.end(),
                           [&](const netem::Feature& f) { return f.name == name && f.available; });
    }
    bool vm_ready() const { return vm_missing.empty(); }
};

Here look_at_machine() {
    Here m;
    auto missing = lab::missing_capabilities(lab::effective_capabilities());
    auto has = [&](const char* cap) { return std::find(missing.begin(), missing.end(), cap) == missing.end(); };
    m.net_admin = has("CAP_NET_ADMIN");
    m.sys_admin = has("CAP_SYS_ADMIN");
    m.cc_available = words_of(read_line("/proc/sys/net/ipv4/tcp_available_congestion_control"));
    m.cc_allowed = words_of(read_line("/proc/sys/net/ipv4/tcp_allowed_congestion_control"));
    m.cc_default = read_line("/proc/sys/net/ipv4/tcp_congestion_control");
    if (m.can_change()) {
        try {
            m.features = netem::probe_kernel_features();
        } catch (const Error& e) {
            m.features_error = e.what();
        }
    } else {
        m.features_error = "not checked: trying qdiscs needs CAP_NET_ADMIN and CAP_SYS_ADMIN (run as root)";
    }
    m.vm_missing = vm::missing_parts();
    if (m.vm_ready()) {
        try {
            auto k = vm::find_kernel(std::nullopt, std::nullopt, vm::kernel_cache_dir());
            m.vm_kernel = fmt::format("{} ({})", k.version, k.image.string());
            m.vm_version = k.version;
            m.vm_accel = vm::expected_accel(*vm::find_qemu(), k.version).reason;
            // From its modules on disk, without booting: what is built in or among the modules
            // the micro-VM loads.
            std::string builtin;
            if (std::filesystem::exists(k.modules_dir / "modules.builtin"))
                builtin = vm::read_file(k.modules_dir / "modules.builtin");
            auto index = vm::ModuleIndex::parse(vm::read_file(k.modules_dir / "modules.dep"), builtin);
            m.vm_offered = vm::offered(index, vm::guest_modules(index, vm::default_modules()));
        } catch (const std::exception& e) {
            m.vm_missing.push_back(e.what());
        }
    }
    return m;
}

/// The congestion controls a namespace may not choose, and the command that allows them.
std::string cc_fix(const Here& m, const std::vector<std::string>& wanted) {
    std::vector<std::string> refused;
    for (const auto& c : wanted)
        if (std::find(m.cc_allowed.begin(), m.cc_allowed.end(), c) == m.cc_allowed.end()) refused.push_back(c);
    if (refused.empty()) return "";
    auto allowed = m.cc_allowed;
    for (const auto& c : refused) allowed.push_back(c);
    return fmt::format(
        "a namespace may choose only what net.ipv4.tcp_allowed_congestion_control lists; to allow {} too: "
        "sysctl -w net.ipv4.tcp_allowed_congestion_control=\"{}\"",
        fmt::join(refused, ", "), fmt::join(allowed, " "));
}

/// One verdict about a thing the experiment needs.
struct Verdict {
    std::string what;    ///< "qdisc netem", "sysctl net.core.rmem_max", "probe bulk (iperf3)"
    std::string status;  ///< "yes", "micro-VM", "NO"
    std::string detail;  ///< why, or what to do
};

/// Whether the lab can be made: here (capabilities), or across machines (ssh).
Verdict lab_verdict(const experiment::LabSpec& lab, const Here& m) {
    using Mode = experiment::LabSpec::Mode;
    if (lab.mode == Mode::hosts) {
        auto ssh = sys::find_program("ssh");
        std::vector<std::string> names;
        for (const auto& machine : lab.machines) names.push_back(machine.name);
        return {"lab across machines", ssh.empty() ? "NO" : "yes",
                ssh.empty() ? "no ssh here: apt-get install openssh-client"
                            : fmt::format("{}; the machines ({}) are not contacted: `wanlab run` checks "
                                          "each one's agent before it changes anything",
                                          ssh, fmt::join(names, ", "))};
    }
    const bool netns = lab.mode == Mode::netns;
    return {netns ? "namespace lab" : fmt::format("host mode on {}", lab.dev), m.can_change() ? "yes" : "NO",
            m.can_change() ? "CAP_NET_ADMIN and CAP_SYS_ADMIN" : "needs CAP_NET_ADMIN and CAP_SYS_ADMIN: run as root"};
}

/// Qdisc `q`'s verdict. In a namespace lab, what this kernel lacks moves the run into the
/// micro-VM (`wanlab run` does so by itself; `moves` is then set); elsewhere it must be
/// here, or on `linker`, the machine that sets link conditions, when that is another one.
Verdict qdisc_verdict(const std::string& q, const experiment::Machine* linker, const Here& m, bool netns, bool& moves) {
    if (linker && linker->ssh != "local")
        return {"qdisc " + q, "there",
                fmt::format("needed on {} ({}): `wanlab doctor` there, or `wanlab run` asks its agent first",
                            linker->name, linker->ssh)};
    if (!m.can_change()) return {"qdisc " + q, "NO", "not checked: run doctor as root"};
    if (m.has_feature(q)) return {"qdisc " + q, "yes", ""};
    if (netns && m.vm_ready()) {
        moves = true;
        if (!m.vm_offered.qdiscs.count(q))
            return {"qdisc " + q, "NO",
                    fmt::format("this kernel lacks it, and so does the micro-VM as it boots its kernel {} (it offers: "
                                "{})",
                                m.vm_version, fmt::join(m.vm_offered.qdiscs, " "))};
        return {"qdisc " + q, "micro-VM",
                "this kernel lacks it: `wanlab run` runs the experiment in the micro-VM (" + m.vm_accel + ")"};
    }
    std::string why = netem::advice_for(q);
    if (netns) why += fmt::format(" The micro-VM cannot boot here yet: {}", fmt::join(m.vm_missing, "; "));
    return {"qdisc " + q, "NO", why};
}

/// The kernel settings a file asks of this machine: sysctl keys, the congestion controls
/// they choose, the ones probes choose per socket, and the keys another machine sets.
struct SettingsNeeded {
    std::map<std::string, std::string> elsewhere;  // key -> the machine that sets it
    std::set<std::string> keys, ccs, socket_ccs;
};

SettingsNeeded settings_needed(const experiment::Experiment& exp, const experiment::LabSpec& lab) {
    // Across machines, a key set on another machine is that machine's business.
    auto remote = [&lab](const std::string& role) {
        const experiment::Machine* mm = lab.mode == experiment::LabSpec::Mode::hosts ? lab.machine(role) : nullptr;
        return mm && mm->ssh != "local";
    };
    SettingsNeeded need;
    auto note = [&need](const sysctl::Setting& s) {
        need.keys.insert(s.key);
        if (s.key == "net.ipv4.tcp_congestion_control") need.ccs.insert(s.value);
    };
    for (const auto& t : exp.trials) {
        for (const auto& p : t.probes)
            if (auto it = p.options.find("congestion_control"); it != p.options.end())
                if (auto cc = std::get_if<std::string>(&it->second); cc && !cc->empty()) need.socket_ccs.insert(*cc);
        for (const auto& s : t.sysctl.global) note(s);
        for (const auto& [host, settings] : t.sysctl.per_host)
            for (const auto& s : settings) {
                if (!remote(host))
                    note(s);
                else if (!need.keys.count(s.key))
                    need.elsewhere.emplace(s.key, host);
            }
    }
    return need;
}

Verdict sysctl_verdict(const std::string& key, bool moves) {
    std::string path = "/proc/sys/" + key;
    std::replace(path.begin() + 10, path.end(), '.', '/');
    std::error_code ec;
    if (moves) return {"sysctl " + key, "micro-VM", "set in the micro-VM's stock kernel"};
    if (std::filesystem::exists(path, ec)) return {"sysctl " + key, "yes", ""};
    return {"sysctl " + key, "NO", fmt::format("this kernel has no {}", path)};
}

bool cc_available(const Here& m, const std::string& cc) {
    return std::find(m.cc_available.begin(), m.cc_available.end(), cc) != m.cc_available.end();
}

std::string cc_missing(const Here& m, const std::string& cc) {
    return fmt::format("not available here (available: {}): modprobe tcp_{}", fmt::join(m.cc_available, " "), cc);
}

/// A congestion control a sysctl chooses: a namespace may choose only the allowed ones.
/// In the micro-VM: whether its kernel offers `cc` as it boots (the modules it loads).
Verdict vm_cc_verdict(const std::string& what, const std::string& cc, const Here& m) {
    if (m.vm_offered.congestion_controls.count(cc)) return {what, "micro-VM", "chosen in the micro-VM's stock kernel"};
    return {what, "NO",
            fmt::format("the run moves into the micro-VM, whose kernel {} has no {} as it boots (it offers: {})",
                        m.vm_version, cc, fmt::join(m.vm_offered.congestion_controls, " "))};
}

Verdict cc_verdict(const std::string& cc, const Here& m, bool netns, bool moves) {
    if (moves) return vm_cc_verdict("congestion control " + cc, cc, m);
    if (!cc_available(m, cc)) return {"congestion control " + cc, "NO", cc_missing(m, cc)};
    if (auto fix = cc_fix(m, {cc}); netns && !fix.empty()) return {"congestion control " + cc, "NO", fix};
    return {"congestion control " + cc, "yes", ""};
}

/// A probe's own congestion control is set per socket (TCP_CONGESTION): root may choose any
/// the kernel has, in any namespace.
Verdict socket_cc_verdict(const std::string& cc, const Here& m, bool moves) {
    if (moves) return vm_cc_verdict("congestion control " + cc + " (per socket)", cc, m);
    bool available = cc_available(m, cc);
    return {"congestion control " + cc + " (per socket)", available ? "yes" : "NO", available ? "" : cc_missing(m, cc)};
}

/// The program a probe runs: a command's, or its external tool; "" when built in.
std::string probe_program(const probes::ProbeSpec& p) {
    const bool own = probes::traits_of(p.kind).user_command;
    std::string program = own && !p.command.empty() ? p.command.front() : "";
    if (!own) {
        auto it = p.options.find("tool");
        if (it != p.options.end()) program = std::get<std::string>(it->second);
        if (program == "builtin") program.clear();
    }
    return program;
}

/// Whether `program` is installed: its path, or the package that brings it.
Verdict program_verdict(std::string what, const std::string& program) {
    auto path = sys::find_program(program);
    const Tool* known = sys::known_tool(program);
    return {std::move(what), path.empty() ? "NO" : "yes",
            path.empty() ? fmt::format("{} is not installed{}", program,
                                       known ? fmt::format(": apt-get install {}", known->package) : "")
                         : path};
}

/// The programs the probes and services run, each probe and service once.
void check_programs(const experiment::Experiment& exp, std::vector<Verdict>& out) {
    std::set<std::string> seen;
    for (const auto& t : exp.trials)
        for (const auto& p : t.probes) {
            if (!seen.insert("probe " + p.name).second) continue;
            std::string program = probe_program(p);
            if (program.empty())
                out.push_back({fmt::format("probe {} ({})", p.name, p.kind), "yes", "built in"});
            else
                out.push_back(program_verdict(fmt::format("probe {} ({}, {})", p.name, p.kind, program), program));
        }
    for (const auto& t : exp.trials)
        for (const auto& s : t.services) {
            if (!seen.insert("service " + s.name).second || s.command.empty()) continue;
            out.push_back(
                program_verdict(fmt::format("service {} ({})", s.name, s.command.front()), s.command.front()));
        }
}

/// Every thing `exp` needs from this machine, each with its verdict: the lab, the link
/// conditions' qdiscs, the kernel settings, then the programs.
std::vector<Verdict> check_experiment(const experiment::Experiment& exp, const Here& m) {
    const auto& lab = exp.trials.front().lab;
    const bool netns = lab.mode == experiment::LabSpec::Mode::netns;
    std::vector<Verdict> out{lab_verdict(lab, m)};
    bool moves = false;
    const experiment::Machine* linker =
        lab.mode == experiment::LabSpec::Mode::hosts ? lab.machine(lab.link_machine()) : nullptr;
    for (const auto& q : lab::needed_qdiscs(exp)) out.push_back(qdisc_verdict(q, linker, m, netns, moves));
    auto need = settings_needed(exp, lab);
    for (const auto& [k, role] : need.elsewhere)
        if (!need.keys.count(k))
            out.push_back(
                {"sysctl " + k, "there",
                 fmt::format("set on {} ({}) by its agent, which checks it first", role, lab.machine(role)->ssh)});
    for (const auto& k : need.keys) out.push_back(sysctl_verdict(k, moves));
    for (const auto& cc : need.ccs) out.push_back(cc_verdict(cc, m, netns, moves));
    for (const auto& cc : need.socket_ccs) out.push_back(socket_cc_verdict(cc, m, moves));
    check_programs(exp, out);
    return out;
}

json machine_json(const Here& m, const std::vector<std::pair<const Tool*, std::pair<std::string, std::string>>>& tools,
                  const std::vector<lab::JournalFile>& journals) {
    utsname u{};
    uname(&u);
    json feats = json::object();
    for (const auto& f : m.features)
        feats[f.name] = {
            {"available", f.available}, {"detail", f.detail}, {"advice", f.available ? "" : netem::advice_for(f.name)}};
    json report{{"kernel", fmt::format("{} {}", u.sysname, u.release)},
                {"capabilities", {{"CAP_NET_ADMIN", m.net_admin}, {"CAP_SYS_ADMIN", m.sys_admin}}},
                {"congestion_control",
                 {{"available", fmt::format("{}", fmt::join(m.cc_available, " "))},
                  {"allowed", fmt::format("{}", fmt::join(m.cc_allowed, " "))},
                  {"default", m.cc_default},
                  {"fix", cc_fix(m, m.cc_available)}}},
                {"kernel_features", feats},
                {"micro_vm",
                 {{"ready", m.vm_ready()}, {"missing", m.vm_missing}, {"kernel", m.vm_kernel}, {"accel", m.vm_accel}}}};
    if (!m.features_error.empty()) report["kernel_features_error"] = m.features_error;
    json tj = json::object();
    for (const auto& [t, found] : tools)
        tj[t->name] = {{"path", found.first}, {"version", found.second}, {"package", t->package}, {"use", t->use}};
    report["tools"] = tj;
    json jj = json::array();
    for (const auto& j : journals)
        jj.push_back({{"run", j.run},
                      {"path", j.path.string()},
                      {"pid", j.pid},
                      {"state", !j.problem.empty() ? "unreadable"
                                : j.live()         ? "live"
                                                   : "stale"},
                      {"problem", j.problem}});
    report["journals"] = jj;
    return report;
}

void print_machine(const json& r, const Here& m) {
    fmt::print("kernel        {}\n", r["kernel"].get<std::string>());
    fmt::print("capabilities  CAP_NET_ADMIN {}, CAP_SYS_ADMIN {}\n", m.net_admin ? "yes" : "NO",
               m.sys_admin ? "yes" : "NO");
    fmt::print("congestion    available: {}; allowed in namespaces: {}; default: {}\n", fmt::join(m.cc_available, " "),
               fmt::join(m.cc_allowed, " "), m.cc_default);
    if (auto fix = cc_fix(m, m.cc_available); !fix.empty()) fmt::print("              {}\n", fix);
    fmt::print("qdiscs and devices (tried in a scratch namespace):\n");
    if (!m.features_error.empty()) fmt::print("  {}\n", m.features_error);
    for (const auto& f : m.features) {
        fmt::print("  {:<10} {}{}\n", f.name, f.available ? "yes" : "NO",
                   f.detail.empty() ? "" : fmt::format("  ({})", f.detail));
        if (!f.available && !netem::advice_for(f.name).empty())
            fmt::print("             {}\n", netem::advice_for(f.name));
    }
    fmt::print("micro-VM (real netem on a kernel without it):\n");
    if (m.vm_ready()) {
        fmt::print("  ready      kernel {}\n", m.vm_kernel);
        fmt::print("  accel      {}\n", m.vm_accel);
    } else {
        for (const auto& miss : m.vm_missing) fmt::print("  NO         {}\n", miss);
    }
    fmt::print("tools:\n");
    for (const auto& [name, t] : r["tools"].items()) {
        auto path = t["path"].get<std::string>();
        if (path.empty())
            fmt::print("  {:<19} missing (apt-get install {}) - {}\n", name, t["package"].get<std::string>(),
                       t["use"].get<std::string>());
        else
            fmt::print("  {:<19} {}{}\n", name, path,
                       t["version"].get<std::string>().empty() ? "" : "  " + t["version"].get<std::string>());
    }
    fmt::print("journals ({}):", lab::kRunDir);
    if (r["journals"].empty())
        fmt::print(" none: no run is under way and none left anything to restore\n");
    else
        fmt::print("\n");
    for (const auto& j : r["journals"]) {
        auto state = j["state"].get<std::string>();
        auto run = j["run"].get<std::string>();
        if (state == "live")
            fmt::print("  {:<20} live (pid {}): a run or lab under way\n", run, j["pid"].get<int>());
        else if (state == "stale")
            fmt::print("  {:<20} STALE (pid {} is gone): `wanlab restore {}` gives back what it changed\n", run,
                       j["pid"].get<int>(), text::shell_quote(run));
        else
            fmt::print("  {:<20} UNREADABLE: {}; check by hand, then `wanlab restore --forget {}`\n", run,
                       j["problem"].get<std::string>(), text::shell_quote(run));
    }
}

}  // namespace

Runner setup_doctor(CLI::App& sub) {
    struct Options {
        std::string file;
        std::vector<std::string> sets;
        bool json = false;
    };
    auto o = std::make_shared<Options>();
    sub.add_option("FILE", o->file,
                   "An experiment file (or an example's name): also say, for each thing it needs, whether this "
                   "machine has it");
    sub.add_option("--set", o->sets, "Override a key of FILE (repeatable)")->type_name("KEY=VALUE");
    sub.add_flag("--json", o->json, "JSON instead of text");
    return [o] {
        std::optional<experiment::Experiment> exp;
        if (!o->file.empty()) {  // a bad file fails before anything is looked at
            o->file = experiment_path(o->file);
            exp = load_or_throw(o->file, o->sets);
        }
        auto m = look_at_machine();
        std::vector<std::pair<const Tool*, std::pair<std::string, std::string>>> tools;
        for (const auto* t : listed_tools()) tools.emplace_back(t, tool_version(*t));
        std::vector<lab::JournalFile> journals;
        std::error_code ec;
        if (std::filesystem::is_directory(lab::kRunDir, ec)) journals = lab::find_journals(lab::kRunDir);
        auto report = machine_json(m, tools, journals);
        std::vector<Verdict> verdicts;
        if (exp) verdicts = check_experiment(*exp, m);
        const bool ready =
            std::none_of(verdicts.begin(), verdicts.end(), [](const Verdict& v) { return v.status == "NO"; });
        const bool in_vm =
            std::any_of(verdicts.begin(), verdicts.end(), [](const Verdict& v) { return v.status == "micro-VM"; });
        if (exp) {
            json vj = json::array();
            for (const auto& v : verdicts) vj.push_back({{"what", v.what}, {"status", v.status}, {"detail", v.detail}});
            report["experiment"] = {{"file", o->file}, {"verdicts", vj}, {"ready", ready}, {"micro_vm", in_vm}};
        }
        if (o->json) {
            fmt::print("{}\n", report.dump(2));
            return exp && !ready ? 1 : 0;
        }
        print_machine(report, m);
        if (!exp) return 0;
        fmt::print("{}:\n", o->file);
        for (const auto& v : verdicts)
            fmt::print("  {:<40} {}\n", v.what,
                       v.detail.empty() ? v.status : fmt::format("{:<8} {}", v.status, v.detail));
        if (ready)
            fmt::print("verdict: `wanlab run {}` can run here{}\n", text::shell_quote(o->file),
                       in_vm ? ", in the micro-VM" : "");
        else
            fmt::print("verdict: `wanlab run {}` cannot run here yet: fix what says NO above\n",
                       text::shell_quote(o->file));
        return ready ? 0 : 1;
    };
}

}  // namespace wanlab::cli
