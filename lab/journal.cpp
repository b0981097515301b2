#include "lab/journal.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/error.h"
#include "core/sys.h"

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

namespace {
// /proc/PID/stat from field 3 (state) on, "" if there is no such process. Field 2 (comm)
// may contain spaces and parentheses, so the fields start after the last ')'.
std::string stat_after_comm(pid_t pid) {
    std::ifstream in(fmt::format("/proc/{}/stat", pid));
    std::string stat;
    if (!std::getline(in, stat)) return "";
    auto close = stat.rfind(')');
    return close == std::string::npos || close + 2 > stat.size() ? "" : stat.substr(close + 2);
}

// Field 22 (start time) of such a line, 0 if it has none.
unsigned long long start_time_of(const std::string& fields) {
    std::istringstream rest(fields);
    std::string field;
    for (int i = 3; i <= 22 && rest >> field; ++i)
        if (i == 22) return std::stoull(field);
    return 0;
}
}  // namespace

unsigned long long process_start_time(pid_t pid) { return start_time_of(stat_after_comm(pid)); }

Journal::Journal(const std::filesystem::path& dir, const std::string& run)
    : path_(dir / (run + ".journal")), run_(run) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw Error(fmt::format("creating {}: {}", dir.string(), ec.message()));
    fd_ =
        static_cast<int>(sys::check_sys(::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644),
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
    std::string line = entry.dump() + "\n";
    std::string what = fmt::format("writing journal {}", path_.string());
    ssize_t n = sys::check_sys(::write(fd_, line.data(), line.size()), what);
    if (static_cast<std::size_t>(n) != line.size()) sys::fail(what, EIO);
    sys::check_sys(::fsync(fd_), what);
}

json netns_entry(const std::string& name) { return {{"op", "netns"}, {"name", name}}; }
json link_entry(const std::string& ns, const std::string& name) { return {{"op", "link"}, {"ns", ns}, {"name", name}}; }
json sysctl_entry(const std::string& ns, const std::string& key, const std::string& old) {
    return {{"op", "sysctl"}, {"ns", ns}, {"key", key}, {"old", old}};
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

netem::HostUndo host_undo_of(const json& e) {
    netem::HostUndo u;
    u.dev = text_of(e, "dev");
    u.root_snapshot = text_of(e, "snapshot");
    u.ifb = text_of(e, "ifb");
    u.ingress_created = e.value("ingress_created", false);
    u.filter_parent = e.value("filter_parent", 0u);
    u.filter_prio = e.value("filter_prio", static_cast<std::uint16_t>(0));
    u.v6 = e.value("v6", false);
    if (u.dev.empty()) throw Error(fmt::format("journal entry without a device: {}", e.dump()));
    return u;
}

bool JournalFile::live() const {
    if (pid <= 0) return false;
    auto fields = stat_after_comm(pid);  // one read: start time and state of the same process
    if (start_time == 0 || start_time_of(fields) != start_time) return false;
    // A zombie (killed, not yet reaped by its parent) will never undo anything.
    return fields[0] != 'Z' && fields[0] != 'X';
}

JournalFile read_journal(const std::filesystem::path& path) {
    std::ifstream in(path);
    if (!in) sys::fail_errno("reading journal " + path.string());
    JournalFile out;
    out.path = path;
    out.run = path.stem().string();
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        json e = json::parse(line, nullptr, false);
        if (e.is_discarded() || !e.is_object()) continue;  // a torn write: its change never started
        if (text_of(e, "op") == "begin") {
            out.run = text_of(e, "run");
            out.pid = e.value("pid", 0);
            out.start_time = e.value("start_time", 0ULL);
            continue;
        }
        out.entries.push_back(std::move(e));
    }
    return out;
}

std::vector<JournalFile> find_journals(const std::filesystem::path& dir) {
    std::vector<JournalFile> out;
    std::error_code ec;
    for (const auto& f : std::filesystem::directory_iterator(dir, ec))
        if (f.path().extension() == ".journal") out.push_back(read_journal(f.path()));
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.run < b.run; });
    return out;
}

std::vector<std::string> replay(const JournalFile& journal, const Undo& undo) {
    std::vector<std::string> failures;
    for (auto it = journal.entries.rbegin(); it != journal.entries.rend(); ++it) {
        const json& e = *it;
        std::string op = text_of(e, "op");
        try {
            if (op == "netns" && undo.netns)
                undo.netns(text_of(e, "name"));
            else if (op == "link" && undo.link)
                undo.link(text_of(e, "ns"), text_of(e, "name"));
            else if (op == "sysctl" && undo.sysctl)
                undo.sysctl(text_of(e, "ns"), text_of(e, "key"), text_of(e, "old"));
            else if (op == "qdisc" && undo.qdisc)
                undo.qdisc(text_of(e, "ns"), text_of(e, "dev"), text_of(e, "snapshot"));
            else if (op == "host" && undo.host)
                undo.host(text_of(e, "ns"), host_undo_of(e));
            else
                failures.push_back(fmt::format("no way to undo journal entry {}", e.dump()));
        } catch (const std::exception& ex) {
            failures.push_back(ex.what());
        }
    }
    return failures;
}

FileLock::FileLock(const std::filesystem::path& path, bool wait, const std::string& what) {
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);
    fd_ = static_cast<int>(sys::check_sys(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644),
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
