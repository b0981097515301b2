#include "lab/journal.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "core/error.h"
#include "core/json.h"
#include "core/sys.h"
#include "core/text.h"
#include "sysctl/sysctl_spec.h"

namespace wanlab::lab {
namespace {

using nlohmann::json;

void fsync_dir(const std::filesystem::path& dir) {
    sys::Fd d(static_cast<int>(sys::check_sys(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC),
                                              fmt::format("opening {}", dir.string()))));
    sys::check_sys(::fsync(d.get()), fmt::format("syncing {}", dir.string()));
}

std::string text_of(const json& e, const char* key) {
    auto it = e.find(key);
    return it != e.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

bool valid_run_id(const std::string& run) {
    return !run.empty() && run.size() <= 24 && std::all_of(run.begin(), run.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
    });
}

void check_run_dir(const std::filesystem::path& dir) {
    std::string d = dir.string();
    std::error_code ec;
    if (dir.has_parent_path()) std::filesystem::create_directories(dir.parent_path(), ec);
    if (::mkdir(d.c_str(), 0700) != 0 && errno != EEXIST) sys::fail_errno("creating " + d);
    int raw = ::open(d.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (raw < 0 && (errno == ELOOP || errno == ENOTDIR)) {
        struct stat l {};
        bool link = ::lstat(d.c_str(), &l) == 0 && S_ISLNK(l.st_mode);
        throw Error(
            fmt::format("{} is {}, not a directory of wanlab's: wanlab acts on the journals it finds there, so "
                        "it trusts only a real directory it owns. Look at it, remove it (`rm {}`), and run "
                        "again",
                        d, link ? "a symbolic link" : "not a directory", d));
    }
    sys::Fd fd(static_cast<int>(sys::check_sys(raw, "opening " + d)));
    struct stat st {};
    sys::check_sys(::fstat(fd.get(), &st), "checking " + d);
    if (st.st_uid != ::geteuid())
        throw Error(
            fmt::format("{} belongs to uid {}, not to uid {} (this wanlab): whoever owns it could plant "
                        "journals that wanlab would replay as root. Check its contents, then remove it or "
                        "`chown {}` it",
                        d, st.st_uid, ::geteuid(), ::geteuid()));
    // Older wanlab versions made it with the umask (0755); nobody else needs to read it.
    if ((st.st_mode & 077) != 0) sys::check_sys(::fchmod(fd.get(), 0700), "making " + d + " private (0700)");
}

Journal::Journal(const std::filesystem::path& dir, const std::string& run)
    : path_(dir / (run + ".journal")), run_(run) {
    check_run_dir(dir);
    fd_ = static_cast<int>(
        sys::check_sys(::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600),
                       fmt::format("creating journal {}", path_.string())));
    try {
        fsync_dir(dir);
        record({{"op", "begin"},
                {"run", run},
                {"pid", ::getpid()},
                {"start_time", process_start_time(::getpid())},
                {"version", 1}});
    } catch (...) {
        ::close(fd_);
        ::unlink(path_.c_str());
        throw;
    }
}

Journal::~Journal() {
    ::close(fd_);
    if (keep_) {
        std::fputs(fmt::format("wanlab: warning: not everything could be restored; the journal stays at {}; "
                               "run `wanlab restore` to retry\n",
                               path_.string())
                       .c_str(),
                   stderr);
        return;
    }
    if (::unlink(path_.c_str()) == 0) {
        try {
            fsync_dir(path_.parent_path());
        } catch (const std::exception&) {
            // The file is gone from the namespace; losing the directory sync only risks a
            // stale journal after a power cut, and /run is tmpfs anyway.
        }
    }
}

void Journal::record(const json& entry) {
    std::string line = json_input::dump(entry) + "\n";
    std::string what = fmt::format("writing journal {}", path_.string());
    ssize_t n = sys::check_sys(::write(fd_, line.data(), line.size()), what);
    if (static_cast<std::size_t>(n) != line.size()) sys::fail(what, EIO);
    sys::check_sys(::fsync(fd_), what);
}

json netns_entry(const std::string& name) { return {{"op", "netns"}, {"name", name}}; }
json link_entry(const std::string& ns, const std::string& name) { return {{"op", "link"}, {"ns", ns}, {"name", name}}; }
json sysctl_entry(const std::string& ns, const std::string& key, const std::string& old, const std::string& wrote) {
    return {{"op", "sysctl"}, {"ns", ns}, {"key", key}, {"old", old}, {"wrote", wrote}};
}

json sysctl_write_entry(const std::string& ns, const std::string& key, const std::string& value) {
    return {{"op", "sysctl-write"}, {"ns", ns}, {"key", key}, {"value", value}};
}

json qdisc_entry(const std::string& ns, const std::string& dev, const std::string& snapshot) {
    return {{"op", "qdisc"}, {"ns", ns}, {"dev", dev}, {"snapshot", snapshot}};
}

json host_entry(const std::string& ns, const netem::HostUndo& u) {
    return {{"op", "host"},
            {"ns", ns},
            {"dev", u.dev},
            {"snapshot", u.root_snapshot},
            {"ifb", u.ifb},
            {"ingress_created", u.ingress_created},
            {"filter_parent", u.filter_parent},
            {"filter_prio", u.filter_prio},
            {"v6", u.v6}};
}

json process_entry(const std::string& ns, const std::string& name, pid_t pid, unsigned long long start_time) {
    return {{"op", "process"}, {"ns", ns}, {"name", name}, {"pid", pid}, {"start_time", start_time}};
}

json folder_entry(const std::string& path) { return {{"op", "folder"}, {"path", path}}; }

netem::HostUndo host_undo_of(const json& e) {
    netem::HostUndo u;
    u.dev = text_of(e, "dev");
    u.root_snapshot = text_of(e, "snapshot");
    u.ifb = text_of(e, "ifb");
    u.ingress_created = e.value("ingress_created", false);
    u.filter_parent = e.value("filter_parent", 0u);
    u.filter_prio = e.value("filter_prio", static_cast<std::uint16_t>(0));
    u.v6 = e.value("v6", false);
    if (u.dev.empty()) throw Error(fmt::format("journal entry without a device: {}", json_input::dump(e)));
    return u;
}

bool JournalFile::live() const {
    // A zombie (killed, not yet reaped by its parent) will never undo anything.
    return pid > 0 && start_time != 0 && sys::process_running(pid, start_time);
}

JournalFile read_journal(const std::filesystem::path& path) {
    JournalFile out;
    out.path = path;
    out.run = path.stem().string();
    std::string text;
    try {
        text = sys::read_file(path.string(), sys::kMaxInputBytes, "journal", true);
    } catch (const Error& e) {
        out.problem = e.what();
        return out;
    }
    std::istringstream in(text);
    std::string line;
    bool begun = false;
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        json e = json_input::parse(line);
        if (e.is_discarded() || !e.is_object()) continue;  // a torn write: its change never started
        if (text_of(e, "op") == "begin") {
            if (begun) continue;
            begun = true;
            out.run = text_of(e, "run");
            auto pid = e.find("pid");
            auto start = e.find("start_time");
            if (pid != e.end() && pid->is_number_integer()) out.pid = pid->get<pid_t>();
            if (start != e.end() && start->is_number_unsigned()) out.start_time = start->get<unsigned long long>();
            continue;
        }
        out.entries.push_back(std::move(e));
    }
    if (!begun)
        out.problem = fmt::format("journal {} has no begin entry: not a journal wanlab wrote", path.string());
    else if (out.run != path.stem().string() || !valid_run_id(out.run))
        out.problem = fmt::format("journal {} names run \"{}\", which does not match its file name", path.string(),
                                  text::terminal_safe(out.run));
    if (!out.problem.empty()) out.run = path.stem().string();  // what `restore --forget RUN` takes
    return out;
}

std::vector<JournalFile> find_journals(const std::filesystem::path& dir) {
    std::vector<JournalFile> out;
    std::error_code ec;
    if (!std::filesystem::exists(std::filesystem::symlink_status(dir, ec))) return out;
    check_run_dir(dir);
    for (const auto& f : std::filesystem::directory_iterator(dir, ec))
        if (f.path().extension() == ".journal") out.push_back(read_journal(f.path()));
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.run < b.run; });
    return out;
}

namespace {
std::string one_line_problem(const json& e, const char* key) {
    auto it = e.find(key);
    if (it == e.end() || !it->is_string()) return fmt::format("`{}` is missing or not a string", key);
    if (auto c = text::control_character(it->get<std::string>()))
        return fmt::format("`{}` contains {}", key, text::describe_control(it->get<std::string>(), *c));
    return "";
}

// A namespace a run's journal may name: one of the run's own, or "" (the host) if allowed.
std::string netns_problem(const json& e, const char* key, const std::string& run, bool host_allowed) {
    if (auto p = one_line_problem(e, key); !p.empty()) return p;
    std::string ns = text_of(e, key);
    if (ns.empty()) return host_allowed ? "" : fmt::format("`{}` is empty", key);
    if (!ns.starts_with("wanlab-" + run + "-"))
        return fmt::format("`{}` = \"{}\" is not one of run {}'s namespaces (wanlab-{}-...)", key, ns, run, run);
    if (auto p = sys::netns_name_problem(ns); !p.empty()) return fmt::format("`{}`: {}", key, p);
    return "";
}

std::string device_problem(const json& e, const char* key) {
    if (auto p = one_line_problem(e, key); !p.empty()) return p;
    if (auto p = sys::device_name_problem(text_of(e, key)); !p.empty()) return fmt::format("`{}`: {}", key, p);
    return "";
}

std::string sysctl_key_problem(const json& e) {
    if (auto p = one_line_problem(e, "key"); !p.empty()) return p;
    if (!sysctl::valid_key_syntax(text_of(e, "key"))) return "`key` is not a canonical net.* sysctl name";
    return "";
}
}  // namespace

std::string entry_problem(const json& e, const std::string& run) {
    std::string op = text_of(e, "op");
    std::vector<std::string> problems;
    auto add = [&](std::string p) {
        if (!p.empty()) problems.push_back(std::move(p));
    };
    if (op == "netns") {
        add(netns_problem(e, "name", run, false));
    } else if (op == "link" || op == "qdisc") {
        add(netns_problem(e, "ns", run, false));
        add(device_problem(e, op == "link" ? "name" : "dev"));
        if (op == "qdisc" && !e.contains("snapshot")) add("`snapshot` is missing");
    } else if (op == "sysctl" || op == "sysctl-write") {
        add(netns_problem(e, "ns", run, true));
        add(sysctl_key_problem(e));
        add(one_line_problem(e, op == "sysctl" ? "old" : "value"));
        if (op == "sysctl" && e.contains("wrote")) add(one_line_problem(e, "wrote"));
    } else if (op == "process") {
        add(netns_problem(e, "ns", run, true));
        add(one_line_problem(e, "name"));
        auto pid = e.find("pid");
        auto start = e.find("start_time");
        if (pid == e.end() || !pid->is_number_integer() || pid->get<long long>() <= 1 ||
            pid->get<long long>() > 4194304)
            add("`pid` must be a process id above 1");
        if (start == e.end() || !start->is_number_unsigned() || start->get<unsigned long long>() == 0)
            add("`start_time` must be a process start time");
    } else if (op == "folder") {
        // Only what make_service_dir() makes: one /tmp/wanlab-* folder, never a path elsewhere.
        auto path = text_of(e, "path");
        auto name = path.starts_with("/tmp/wanlab-") ? path.substr(5) : "";
        if (name.size() < 8 || name.size() > 120 ||
            name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") !=
                std::string::npos)
            add(fmt::format("`path` = \"{}\" is not a folder wanlab makes (/tmp/wanlab-...)", path.substr(0, 120)));
    } else if (op == "host") {
        add(netns_problem(e, "ns", run, true));
        add(device_problem(e, "dev"));
        std::string ifb = text_of(e, "ifb");
        if (!ifb.empty() && (!ifb.starts_with("wlifb-") || !sys::device_name_problem(ifb).empty()))
            add(fmt::format("`ifb` = \"{}\" is not a device wanlab makes (wlifb-...)", ifb));
    } else {
        add(fmt::format("unknown operation \"{}\"", op));
    }
    std::string out;
    for (const auto& p : problems) out += (out.empty() ? "" : "; ") + p;
    return text::terminal_safe(out);
}

std::vector<std::string> replay(const JournalFile& journal, const Undo& undo) {
    std::vector<std::string> failures;
    if (!journal.problem.empty()) return {journal.problem};
    // What the run wrote last to each key: a later sysctl-write entry overrides the first.
    std::map<std::pair<std::string, std::string>, std::string> wrote;
    for (const json& e : journal.entries) {
        std::string op = text_of(e, "op");
        if ((op == "sysctl" || op == "sysctl-write") && entry_problem(e, journal.run).empty())
            wrote[{text_of(e, "ns"), text_of(e, "key")}] = text_of(e, op == "sysctl" ? "wrote" : "value");
    }
    for (auto it = journal.entries.rbegin(); it != journal.entries.rend(); ++it) {
        const json& e = *it;
        std::string op = text_of(e, "op");
        if (auto problem = entry_problem(e, journal.run); !problem.empty()) {
            failures.push_back(fmt::format("journal entry left alone, not one wanlab writes ({}): {}", problem,
                                           text::terminal_safe(json_input::dump(e))));
            continue;
        }
        try {
            if (op == "sysctl-write")
                continue;  // the entry before the key's first change undoes it
            else if (op == "netns" && undo.netns)
                undo.netns(text_of(e, "name"));
            else if (op == "link" && undo.link)
                undo.link(text_of(e, "ns"), text_of(e, "name"));
            else if (op == "sysctl" && undo.sysctl)
                undo.sysctl(text_of(e, "ns"), text_of(e, "key"), text_of(e, "old"),
                            wrote[{text_of(e, "ns"), text_of(e, "key")}]);
            else if (op == "qdisc" && undo.qdisc)
                undo.qdisc(text_of(e, "ns"), text_of(e, "dev"), text_of(e, "snapshot"));
            else if (op == "process" && undo.process)
                undo.process(text_of(e, "name"), e["pid"].get<pid_t>(), e["start_time"].get<unsigned long long>());
            else if (op == "host" && undo.host)
                undo.host(text_of(e, "ns"), host_undo_of(e));
            else if (op == "folder" && undo.folder)
                undo.folder(text_of(e, "path"));
            else
                failures.push_back(fmt::format("no way to undo journal entry {}", json_input::dump(e)));
        } catch (const std::exception& ex) {
            failures.push_back(ex.what());
        }
    }
    return failures;
}

FileLock::FileLock(const std::filesystem::path& path, bool wait, const std::string& what) {
    check_run_dir(path.parent_path());
    fd_ = static_cast<int>(sys::check_sys(::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600),
                                          fmt::format("opening lock {}", path.string())));
    int rc;
    do rc = ::flock(fd_, LOCK_EX | (wait ? 0 : LOCK_NB));
    while (rc != 0 && errno == EINTR);
    if (rc == 0) return;
    int err = errno;
    ::close(fd_);
    if (err == EWOULDBLOCK)
        throw Error(fmt::format("another wanlab run is changing {} (lock {} is held)", what, path.string()));
    sys::fail(fmt::format("locking {}", path.string()), err);
}

FileLock::~FileLock() {
    if (fd_ >= 0) ::close(fd_);
}

}  // namespace wanlab::lab
