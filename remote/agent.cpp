#include "remote/agent.h"

#include <poll.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "core/error.h"
#include "core/json.h"
#include "core/signals.h"
#include "core/sys.h"
#include "core/text.h"
#include "diagnosis/counters.h"
#include "lab/capabilities.h"
#include "lab/restore.h"
#include "lab/session.h"
#include "lab/watchdog.h"
#include "netem/host.h"
#include "netem/kernel.h"
#include "netem/preflight.h"
#include "remote/flows.h"
#include "remote/protocol.h"
#include "services/service.h"
#include "sysctl/snapshot.h"
#include "sysctl/sysctl_spec.h"
#include "sysctl/validate.h"

namespace wanlab::remote {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr std::size_t kMaxRequest = 16 << 20;
constexpr unsigned kDefaultLeaseS = 30;
constexpr unsigned kMaxLeaseS = 3600;            // an hour without a word is a controller gone
constexpr unsigned kMaxDeadlineS = 366 * 86400;  // a year: no run plans longer

// A request's fields, checked as strictly as the experiment file's: a refusal names the op and
// the field, and nothing of a field that failed is used.
[[noreturn]] void refuse(const json& r, const char* field, std::string_view why) {
    auto op = r.find("op");
    throw InputError(
        fmt::format("{}: `{}` {}", op != r.end() && op->is_string() ? op->get<std::string>() : "?", field, why));
}
unsigned uint_field(const json& r, const char* field, unsigned fallback, unsigned max) {
    auto it = r.find(field);
    if (it == r.end()) return fallback;
    if (!it->is_number_unsigned() || it->get<std::uint64_t>() > max)
        refuse(r, field, fmt::format("must be a whole number from 0 to {}", max));
    return it->get<unsigned>();
}
/// Keys of this machine's namespace the run changes: each canonical (net.*, no `/`, no `..`),
/// as it names a lock file in the journal directory.
std::vector<std::string> key_list(const json& r, const char* field) {
    std::vector<std::string> keys;
    auto it = r.find(field);
    if (it == r.end()) return keys;
    if (!it->is_array()) refuse(r, field, "must be an array of sysctl keys");
    for (const auto& k : *it) {
        if (!k.is_string() || !sysctl::valid_key_syntax(k.get<std::string>()))
            refuse(r, field,
                   fmt::format("holds {}, which is not a sysctl key (net. then lowercase letters, digits, `_`, `-` "
                               "in dot-separated parts)",
                               text::terminal_safe(json_input::dump(k).substr(0, 80))));
        keys.push_back(k.get<std::string>());
    }
    return keys;
}

void say(const std::string& line) { std::fprintf(stderr, "wanlab agent: %s\n", text::terminal_safe(line).c_str()); }

/// HostSession: this host's part of a run. Creates, on begin(): the run's journal (under the
/// journal directory's lock, stale journals settled) and the watchdog; then sysctls, link
/// conditions (netem/host.h, on one interface toward one address) and services, each
/// journaled first. Undoes: services, then link conditions, then sysctls, then removes the
/// journal (kept if an undo failed), in give_back() or the destructor.
class HostSession {
public:
    HostSession(const AgentOptions& o, const json& begin, sysctl::ProcSys& proc) : proc_(proc) {
        run_ = json_input::field<std::string>(begin, "run", "begin");
        if (!lab::valid_run_id(run_)) refuse(begin, "run", "must be a run id: 1-24 of a-z, 0-9 and -");
        bool restore = json_input::field_or(begin, "restore", false, "begin");
        bool resume = json_input::field_or(begin, "resume", false, "begin");
        auto deadline_s = uint_field(begin, "deadline_s", 0, kMaxDeadlineS);
        auto keys = key_list(begin, "global_keys");
        lab::check_run_dir(o.dir);
        run_dir_ = o.dir;
        {
            lab::FileLock start(o.dir / "lock", true, "the journal directory");
            // A resumed run's machine first undoes what the killed session of this run left.
            lab::settle_stale_journals(o.dir, restore, proc, say, resume ? run_ : "");
            // Keys of this machine's namespace: one run at a time changes each (as a local run).
            for (const auto& k : keys) locks_.emplace_back(o.dir / fmt::format("sysctl-{}.lock", k), false, k);
            journal_.emplace(o.dir, run_);
        }
        if (deadline_s > 0) watchdog_.arm(lab::run_watchdog(run_, deadline_s, o.dir));
        lab::Journal* journal = &*journal_;
        sysctls_.emplace(
            proc,
            [journal](const std::string& ns, const std::string& key, const std::string* old, const std::string& value) {
                journal->record(old ? lab::sysctl_entry(ns, key, *old, value)
                                    : lab::sysctl_write_entry(ns, key, value));
            },
            [journal] { journal->keep(); });
        dir_ = sys::make_service_dir("wanlab-agent-" + run_, "this host's services");
        journal_->record(lab::folder_entry(dir_.string()));  // a kill leaves it to `wanlab restore`
    }

    ~HostSession() { give_back(); }

    /// The trial's sysctls of this host: validated, then set; keys an earlier trial set and
    /// this one does not go back to their values from before the run.
    void apply_sysctls(const json& set) {
        stop_services();
        std::vector<sysctl::Change> changes;
        if (!set.is_array()) throw InputError("sysctl: `set` must be an array of [key, value] pairs");
        for (const auto& kv : set) {
            if (!kv.is_array() || kv.size() != 2 || !kv[0].is_string() || !kv[1].is_string() ||
                !sysctl::valid_key_syntax(kv[0].get<std::string>()) ||
                kv[1].get_ref<const std::string&>().size() > 4096)
                throw InputError(fmt::format("sysctl: `set` holds {}, which is not a [sysctl key, value] pair",
                                             text::terminal_safe(json_input::dump(kv).substr(0, 80))));
            changes.push_back({"", kv[0].get<std::string>(), kv[1].get<std::string>(), sysctl::Scope::unknown});
        }
        sysctl::validate_or_throw(proc_, changes);
        for (const auto& saved : sysctls_->saved()) {
            auto same = [&saved](const sysctl::Change& c) { return c.key == saved.key; };
            if (std::none_of(changes.begin(), changes.end(), same)) sysctls_->set(saved.ns, saved.key, saved.old);
        }
        for (const auto& c : changes) sysctls_->set("", c.key, c.value);
    }

    /// The trial's link conditions on this machine's interface `dev` (if "", the one that
    /// routes to `target`), for traffic to and from
    /// `target` only and never for the `exempt` connections (the controller's own ssh
    /// connections): the interface locked for the run and its undo journaled before the first
    /// change; a later trial's replace them in place.
    void apply_link(const json& r) {
        // Before anything changes here: what this trial's tree needs, on this kernel.
        std::set<std::string> unchecked;
        for (auto& k : json_input::field_or(r, "needs", std::set<std::string>{}, "link"))
            if (!checked_.count(k)) unchecked.insert(k);
        if (auto missing = lab::missing_features(unchecked); !missing.empty())
            throw InputError(fmt::format("this machine's kernel lacks {}, which the link conditions need here. {}",
                                         fmt::join(missing, ", "), netem::advice_for(missing.front())));
        checked_.insert(unchecked.begin(), unchecked.end());
        auto dev = json_input::field<std::string>(r, "dev", "link");
        auto target_address = json_input::field<std::string>(r, "target", "link");
        // Every field read before anything is made.
        auto up = direction_of(json_input::field<json>(r, "up", "link"));
        auto down = direction_of(json_input::field<json>(r, "down", "link"));
        auto mtu = json_input::field<std::uint32_t>(r, "mtu", "link");
        if (dev.empty()) dev = dev_.empty() ? route_device(target_address) : dev_;
        if (!host_) {
            if (auto why = sys::device_name_problem(dev); !why.empty())
                throw InputError(fmt::format("link: `{}`: {}", dev, why));
            netem::Filter target{target_address, 0, false, json_input::field<std::uint64_t>(r, "line_rate", "link")};
            for (const auto& f : json_input::field<json::array_t>(r, "exempt", "link"))
                target.exempt.push_back(flow_of(f));
            // This agent's own ssh connection too: the controller may be the server itself.
            if (auto own = ssh_connection_flow(std::getenv("SSH_CONNECTION"))) target.exempt.push_back(*own);
            dev_lock_.emplace(run_dir_ / fmt::format("dev-{}.lock", dev), false, "device " + dev);
            kernel_.emplace("");
            host_.emplace(*kernel_, dev, target, target.line_rate_bps);
            host_->check(json_input::field_or(r, "any_up", true, "link"),
                         json_input::field_or(r, "any_down", true, "link"));
            journal_->record(lab::host_entry("", host_->undo_plan()));  // before its first change
            dev_ = dev;
        } else if (dev != dev_) {
            throw InputError(fmt::format("link: this run impairs {} here, not {}", dev_, dev));
        }
        host_->apply(up, down, mtu, netem::Psched::from_proc());
    }

    /// Starts a service of the trial in its folder here, journaled, and waits until it is
    /// ready. Returns the folder.
    std::string start_service(const json& request, const probes::Tick& tick) {
        auto spec = service_of(json_input::field<json>(request, "service", "service_start"));
        auto values = json_input::field<std::map<std::string, std::string>>(request, "values", "service_start");
        auto trial = json_input::field<std::string>(request, "trial", "service_start");
        if (!lab::valid_run_id(trial))
            throw InputError("service_start: `trial` must be a trial folder name: 1-24 of a-z, 0-9 and -");
        auto dir = dir_ / trial;
        std::filesystem::create_directories(dir);
        values["dir"] = dir.string();
        lab::Journal* journal = &*journal_;
        auto started = [&](pid_t pid) {
            journal->record(lab::process_entry("", spec.name, pid, sys::process_start_time(pid)));
        };
        services::Placement here{"",
                                 json_input::field_or(request, "address", std::string("127.0.0.1"), "service_start")};
        services_.push_back(std::make_unique<services::Service>(spec, here, values, dir, started));
        services_.back()->wait_ready(tick);
        return dir.string();
    }

    void check_services() {
        for (auto& s : services_) s->check_running();
    }

    /// Starts the server half of one measurement of a built-in probe (probes::serve_far()) at
    /// `address` ("" = any of this machine's) and `port` (0 = a free one); one at a time, so
    /// a server the controller never stopped ends here. Returns the port it listens on.
    std::uint16_t serve_probe(const json& r) {
        stop_probe();
        auto spec = probe_of(json_input::field<json>(r, "probe", "probe_serve"));
        probes::Endpoint at{"", json_input::field_or(r, "address", std::string(), "probe_serve"),
                            json_input::field_or(r, "port", std::uint16_t{0}, "probe_serve")};
        far_ = probes::serve_far(spec, at);
        return far_->port();
    }
    /// Stops the probe's server; what it saw (nothing when none ran).
    probes::FarReport stop_probe() {
        if (!far_) return {};
        auto server = std::move(far_);
        return server->stop();
    }
    void stop_services() noexcept {
        while (!services_.empty()) services_.pop_back();
    }

    /// Everything back, newest first; the journal goes unless an undo failed. Idempotent.
    /// Returns the notes (a key left alone because someone else changed it).
    std::vector<std::string> give_back() noexcept {
        std::vector<std::string> notes;
        far_.reset();
        stop_services();
        if (host_) {
            try {
                host_->restore();
            } catch (const std::exception& e) {
                say(fmt::format("giving {} back: {}; `wanlab restore {}` on this host retries", dev_, e.what(), run_));
                if (journal_) journal_->keep();
            }
            host_.reset();
        }
        kernel_.reset();
        dev_lock_.reset();
        if (sysctls_) {
            try {
                notes = sysctls_->restore();
            } catch (const std::exception& e) {
                say(fmt::format("giving the sysctls back: {}; `wanlab restore {}` on this host retries", e.what(),
                                run_));
                if (journal_) journal_->keep();
            }
            sysctls_.reset();
        }
        if (!dir_.empty()) {
            std::error_code ec;
            std::filesystem::remove_all(dir_, ec);
            dir_.clear();
        }
        journal_.reset();
        watchdog_.retire();  // at once: nothing of the run stays once `end` is answered
        locks_.clear();
        return notes;
    }

private:
    sysctl::ProcSys& proc_;
    std::string run_;
    // Creation order; give_back() undoes in reverse.
    std::vector<lab::FileLock> locks_;
    std::optional<lab::Journal> journal_;
    lab::RunWatchdog watchdog_;
    std::optional<sysctl::SysctlSnapshot> sysctls_;
    std::optional<lab::FileLock> dev_lock_;
    std::optional<netem::NetlinkKernel> kernel_;
    std::optional<netem::HostImpairment> host_;
    std::string dev_;
    std::set<std::string> checked_;  ///< the kernel features found here
    std::filesystem::path run_dir_;
    std::filesystem::path dir_;
    std::vector<std::unique_ptr<services::Service>> services_;
    std::unique_ptr<probes::FarServer> far_;  ///< the measurement's probe server, if one runs
};

json counters_now() {
    json cpu = json::array();
    for (const auto& [busy, total] : diagnosis::read_cpu_times()) cpu.push_back({busy, total});
    return {{"counters", diagnosis::read_counters("")}, {"cpu", cpu}};
}

/// Reads one request line from `in` into `line`, waiting at most `lease`; also wakes for a
/// signal. Returns false on EOF.
enum class Wait { line, eof, lease, signal, too_long };

class Input {
public:
    explicit Input(int fd) : fd_(fd) {}
    Wait next(std::string& line, std::chrono::milliseconds lease, sys::SignalEvents& signals) {
        auto end = std::chrono::steady_clock::now() + lease;
        for (;;) {
            if (auto nl = buf_.find('\n'); nl != std::string::npos) {
                line = buf_.substr(0, nl);
                buf_.erase(0, nl + 1);
                return Wait::line;
            }
            if (buf_.size() > kMaxRequest) return Wait::too_long;  // not a controller
            auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
            if (left.count() <= 0) return Wait::lease;
            pollfd p[2] = {{fd_, POLLIN, 0}, {signals.fd(), POLLIN, 0}};
            if (::poll(p, 2, static_cast<int>(left.count())) < 0 && errno != EINTR) return Wait::eof;
            if (p[1].revents && signals.wait(0ms)) return Wait::signal;
            if (p[0].revents) {
                char b[65536];
                ssize_t n = ::read(fd_, b, sizeof b);
                if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) return Wait::eof;
                if (n > 0) buf_.append(b, static_cast<std::size_t>(n));
            }
        }
    }

    /// Puts a line back, to be the next one read.
    void unread(const std::string& line) { buf_.insert(0, line + "\n"); }

private:
    int fd_;
    std::string buf_;
};

void write_line(int fd, const json& j) {
    auto line = json_input::dump(j) + "\n";
    for (std::size_t off = 0; off < line.size();) {
        ssize_t n = ::write(fd, line.data() + off, line.size() - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) throw Error("the controller is gone");
        off += static_cast<std::size_t>(n);
    }
}

/// Asks the controller something in the middle of serving its request; its answer.
using Ask = std::function<json(const json&)>;

/// ControllerFar: on the client machine, the far server of a probe the controller started on
/// the server machine; its report comes by asking the controller, which asks that machine.
class ControllerFar final : public probes::FarServer {
public:
    ControllerFar(std::uint16_t port, Ask ask) : port_(port), ask_(std::move(ask)) {}
    std::uint16_t port() const override { return port_; }
    probes::FarReport stop() override {
        if (!report_) report_ = far_report_of(ask_({{"op", "probe_stop"}}));
        return *report_;
    }

private:
    std::uint16_t port_;
    Ask ask_;
    std::optional<probes::FarReport> report_;
};

/// One measurement of a probe with this machine as its client, against the server at
/// request["server"] (its own far server when "far"); the result as JSON.
json run_probe(const json& r, const Ask& ask, const probes::Tick& tick) {
    auto spec = probe_of(json_input::field<json>(r, "probe", "probe_run"));
    auto s = json_input::field<json>(r, "server", "probe_run");
    probes::Endpoints where;
    where.client = {"", "", 0};  // the kernel picks the address toward the server
    where.server = {"", json_input::field<std::string>(s, "address", "probe_run: server"),
                    json_input::field<std::uint16_t>(s, "port", "probe_run: server"), true};
    if (json_input::field_or(s, "far", false, "probe_run: server"))
        where.server.far = std::make_shared<ControllerFar>(where.server.port, ask);
    return probe_result_json(probes::make_probe(spec)->run(where, tick));
}

}  // namespace

int serve(int in, int out, const AgentOptions& options) {
    sys::SignalEvents signals;  // before any thread: SIGTERM, SIGINT, SIGHUP become events
    utsname u{};
    ::uname(&u);
    write_line(out, hello(u.nodename, u.release, u.machine));
    sysctl::RealProcSys proc;
    std::optional<HostSession> session;
    auto lease = std::chrono::milliseconds(kDefaultLeaseS * 1000);
    Input input(in);
    // A service's ready wait also watches the controller's signals; the lease is not
    // renewed meanwhile, so a wait longer than it is the controller's business (it pings).
    probes::Tick tick = [&signals] { signals.check(); };
    // A question to the controller while a request is served: the next line is its answer,
    // or else the controller has moved on (the line is kept for the loop below).
    Ask ask = [&](const json& question) -> json {
        write_line(out, {{"ask", question}});
        std::string line;
        if (input.next(line, lease, signals) != Wait::line) throw Error("the controller is gone");
        auto j = json_input::parse(line);
        if (!j.is_object() || !j.contains("answer")) {
            input.unread(line);
            throw Error("the controller stopped waiting for this measurement");
        }
        if (j.contains("error")) throw Error(j["error"].get<std::string>());
        return j["answer"];
    };
    for (;;) {
        std::string line;
        auto got = input.next(line, lease, signals);
        if (got != Wait::line) {
            if (session) {
                if (got == Wait::lease)
                    say(fmt::format("no word from the controller for {} s: giving this host back",
                                    lease.count() / 1000));
                if (got == Wait::signal) say("signalled: giving this host back");
                session->give_back();
            }
            if (got == Wait::too_long) {
                say(fmt::format("a request line longer than {} MiB: not a controller's; ending", kMaxRequest >> 20));
                try {
                    write_line(out, {{"id", nullptr},
                                     {"ok", false},
                                     {"failure", "error"},
                                     {"error", fmt::format("a request line longer than {} MiB", kMaxRequest >> 20)}});
                } catch (const Error&) {
                    // the controller is gone too
                }
            }
            return got == Wait::eof ? 0 : 1;
        }
        json request = json_input::parse(line);
        // The id is echoed only when it is a number or a short string: nothing large comes back.
        json id = request.is_object() ? request.value("id", json(nullptr)) : json(nullptr);
        if (!id.is_number() && !(id.is_string() && id.get<std::string>().size() <= 64)) id = nullptr;
        json answer = {{"id", id}, {"ok", true}};
        try {
            if (!request.is_object() || !request.contains("op") || !request["op"].is_string())
                throw InputError(fmt::format("a request is a JSON object (nested at most {} levels) with a string `op`",
                                             json_input::kMaxDepth));
            auto op = request.at("op").get<std::string>();
            if (op == "begin") {
                if (session) throw InputError("begin: a run is already under way on this host");
                auto lease_s = uint_field(request, "lease_s", kDefaultLeaseS, kMaxLeaseS);
                if (lease_s == 0) refuse(request, "lease_s", fmt::format("must be 1 to {}", kMaxLeaseS));
                session.emplace(options, request, proc);
                lease = std::chrono::seconds(lease_s);
            } else if (op == "ping") {
            } else if (op == "read") {
                json values = json::object();
                for (const auto& k : json_input::field<std::vector<std::string>>(request, "keys", "read")) {
                    // A key names a file under /proc/sys: never a path out of it.
                    if (!sysctl::valid_key_syntax(k))
                        throw InputError(fmt::format("read: `keys` holds \"{}\", which is not a sysctl key",
                                                     text::terminal_safe(k.substr(0, 80))));
                    if (auto v = proc.read("", k)) values[k] = *v;
                }
                answer["values"] = values;
            } else if (op == "counters") {
                answer.update(counters_now());
            } else if (op == "end") {
                if (session) answer["notes"] = session->give_back();
                session.reset();
                write_line(out, answer);
                return 0;
            } else {
                if (!session) throw InputError(fmt::format("{}: begin first", op));
                if (op == "sysctl")
                    session->apply_sysctls(request.at("set"));
                else if (op == "link")
                    session->apply_link(request);
                else if (op == "service_start")
                    answer["dir"] = session->start_service(request, tick);
                else if (op == "service_check")
                    session->check_services();
                else if (op == "service_stop")
                    session->stop_services();
                else if (op == "probe_serve")
                    answer["port"] = session->serve_probe(request);
                else if (op == "probe_stop")
                    answer["report"] = far_report_json(session->stop_probe());
                else if (op == "probe_run")
                    answer["result"] = run_probe(request, ask, tick);
                else
                    throw InputError(fmt::format("unknown op `{}`", op));
            }
        } catch (const sys::Interrupted&) {
            if (session) session->give_back();
            return 1;
        } catch (const std::exception& e) {
            answer["ok"] = false;
            answer["error"] = e.what();
            answer["failure"] = dynamic_cast<const services::ServiceFailure*>(&e)   ? "service"
                                : dynamic_cast<const probes::MeasurementError*>(&e) ? "measurement"
                                                                                    : "error";
        }
        write_line(out, answer);
    }
}

}  // namespace wanlab::remote
