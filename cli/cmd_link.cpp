// `wanlab link apply|show|clear --dev DEV`: link conditions on one device, interactively, in
// the spirit of tcset/tcshow/tcdel. Every [link] key of the experiment format is a flag of
// the same name and goes through the same loader, so values and cross-field rules are
// checked exactly as in an experiment file. The device's original qdiscs are saved under
// /run/wanlab/link/ on the first apply; `clear` puts them back.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <vector>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/load.h"
#include "core/error.h"
#include "core/sys.h"
#include "core/text.h"
#include "core/units.h"
#include "experiment/experiment.h"
#include "experiment/plan.h"
#include "lab/journal.h"
#include "lab/ssh_guard.h"
#include "lab/watchdog.h"
#include "netem/attributes.h"
#include "netem/device.h"
#include "netem/kernel.h"
#include "netem/readback.h"
#include "netem/tc_command.h"

namespace wanlab::cli {
namespace {

namespace fs = std::filesystem;

/// What a [link] flag's value is, with its unit, for --help (as docs/experiment-format.md
/// describes each key).
std::string value_of(const std::string& key) {
    static const std::map<std::string, std::string> kValues = {
        {"delay", "a duration (e.g. 20ms), one way"},
        {"jitter", "a duration (e.g. 2ms)"},
        {"distribution", "uniform, normal, pareto, paretonormal, experimental or a .dist path"},
        {"limit", "packets, or auto"},
        {"rate", "bit/s (e.g. 100mbit)"},
        {"shaper", "netem, tbf or htb"},
        {"qdisc", "none, pfifo, bfifo, fq_codel or cake"},
        {"qdisc_limit", "packets (bfifo: a size in bytes, e.g. 64KiB)"},
        {"ecn", "true or false"},
        {"gap", "packets"},
        {"packet_overhead", "bytes"},
        {"cell_size", "bytes"},
        {"cell_overhead", "bytes"},
    };
    if (auto it = kValues.find(key); it != kValues.end()) return it->second;
    return "a percentage (e.g. 1%)";  // loss, corrupt, duplicate, reorder and their correlations
}

struct LinkOptions {
    std::string dev;
    std::string netns;
    std::string profile;
    std::map<std::string, std::string> values;
    std::uint32_t mtu = 1500;
    bool dry_run = false;
    bool json = false;
    bool force = false;
    unsigned auto_restore_s = 0;
};

/// The device's lock, the one a host-mode run holds (lab/session.cpp): `link apply` and
/// `link clear` never change a device a run is impairing.
lab::FileLock lock_device(const LinkOptions& o) {
    std::string name = o.netns.empty() ? o.dev : o.netns + "--" + o.dev;
    return lab::FileLock(fs::path(lab::kRunDir) / fmt::format("dev-{}.lock", name), false, "device " + o.dev);
}

fs::path snapshot_path(const LinkOptions& o) {
    return fs::path("/run/wanlab/link") / fmt::format("{}{}.snapshot", o.netns.empty() ? "" : o.netns + "--", o.dev);
}

netem::Direction resolve(const LinkOptions& o) {
    auto exp = load_link_flags(o.profile, o.values, fmt::format("[lab]\nmtu = {}\n", o.mtu), "the link options");
    // One device has one egress: the [link] keys describe it as they describe "up".
    return exp.trials.front().link.up;
}

void write_file_synced(const fs::path& path, const std::string& text) {
    lab::check_run_dir(path.parent_path().parent_path());
    lab::check_run_dir(path.parent_path());
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) sys::fail_errno("writing " + path.string());
    bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
    int saved = errno;
    ::close(fd);
    if (!ok) sys::fail("writing " + path.string(), saved);
}

std::string read_snapshot(const fs::path& path) {
    lab::check_run_dir(path.parent_path());
    return sys::read_file(path.string(), sys::kMaxInputBytes, "saved qdiscs", true);
}

/// A watchdog that runs `wanlab link clear` for this device after `seconds`, whatever happens
/// to this process or the SSH session that started it. Returns its pid.
pid_t arm_auto_restore(const LinkOptions& o, unsigned seconds) {
    lab::WatchdogOptions w;
    w.seconds = seconds;
    w.argv = {lab::self_exe(), "link", "clear", "--dev", o.dev};
    if (!o.netns.empty()) w.argv.insert(w.argv.end(), {"--netns", o.netns});
    return lab::arm_watchdog(w);
}

/// Ends a watchdog whose change failed and was undone: it must not restore later.
void stand_down(const LinkOptions& o, pid_t watchdog) {
    ::kill(watchdog, SIGKILL);
    while (::waitpid(watchdog, nullptr, 0) < 0 && errno == EINTR) {}
    std::printf("%s: the change failed and was undone; watchdog pid %d stood down\n", o.dev.c_str(), watchdog);
    std::fflush(stdout);
}

int apply(const LinkOptions& o) {
    auto d = resolve(o);
    if (!o.dry_run) lab::refuse_if_ssh(o.netns, o.dev, "", 0, o.force);
    if (o.dry_run) {
        for (const auto& line : netem::tc_commands(
                 d, o.dev, o.netns.empty() ? "" : "ip netns exec " + text::shell_quote(o.netns) + " ", o.mtu))
            std::puts(line.c_str());
        return 0;
    }
    auto lock = lock_device(o);
    netem::NetlinkKernel kernel(o.netns);
    auto path = snapshot_path(o);
    // The first apply saves what the device had; later ones keep that original snapshot.
    std::optional<netem::DeviceQdiscs> device;
    if (fs::exists(path)) {
        device.emplace(netem::DeviceQdiscs::from_serialized(kernel, o.dev, read_snapshot(path)));
    } else {
        device.emplace(kernel, o.dev);
        write_file_synced(path, device->serialize());
    }
    // Armed before the change, once the snapshot it restores from is on disk: a wanlab killed
    // half-way through the change is still undone at the deadline.
    pid_t watchdog = 0;
    if (o.auto_restore_s > 0) {
        watchdog = arm_auto_restore(o, o.auto_restore_s);
        std::printf("%s: auto-restore in %u s by watchdog pid %d (`kill %d` keeps the conditions)\n", o.dev.c_str(),
                    o.auto_restore_s, watchdog, watchdog);
        std::fflush(stdout);
    }
    try {
        device->apply(d, o.mtu, netem::Psched::from_proc());
    } catch (...) {
        // Give the device back and forget the snapshot, whatever restore() says; the
        // watchdog then has nothing to undo.
        try {
            device->restore();
        } catch (const Error& e) {
            std::fputs(fmt::format("wanlab: {}\n", text::terminal_safe(e.what())).c_str(), stderr);
        }
        device->release();
        std::error_code ec;
        fs::remove(path, ec);
        if (watchdog > 0) stand_down(o, watchdog);
        throw;
    }
    device->release();  // stays applied until `wanlab link clear`
    std::printf("%s: %s (saved the previous qdiscs; `wanlab link clear --dev %s` restores them)\n", o.dev.c_str(),
                experiment::direction_summary(d).c_str(), o.dev.c_str());
    return 0;
}

int clear(const LinkOptions& o) {
    auto path = snapshot_path(o);
    if (!fs::exists(path)) {
        std::printf("%s: nothing to clear (wanlab has no saved qdiscs for it)\n", o.dev.c_str());
        return 0;
    }
    auto lock = lock_device(o);
    netem::NetlinkKernel kernel(o.netns);
    auto device = netem::DeviceQdiscs::from_serialized(kernel, o.dev, read_snapshot(path));
    device.restore();
    device.release();
    fs::remove(path);
    std::printf("%s: qdiscs restored\n", o.dev.c_str());
    return 0;
}

int show(const LinkOptions& o) {
    netem::NetlinkKernel kernel(o.netns);
    int ifindex = kernel.ifindex(o.dev);
    auto psched = netem::Psched::from_proc();
    nlohmann::json qdiscs = nlohmann::json::array();
    for (const auto& q : kernel.dump(ifindex, false)) {
        nlohmann::json j{
            {"kind", q.kind},
            {"handle", fmt::format("{:x}:", q.handle >> 16)},
            {"parent", q.parent == 0xffffffffu ? "root" : fmt::format("{:x}:{:x}", q.parent >> 16, q.parent & 0xffff)}};
        std::string summary;
        if (q.kind == "netem") {
            netem::Direction d;
            d.netem = netem::decode_netem(q.options, psched);
            d.rate_bps = d.netem.rate_bps;
            summary = netem::netem_arguments(d.netem);
            j["delay"] = static_cast<double>(d.netem.delay.count()) / 1e9;
            j["jitter"] = static_cast<double>(d.netem.jitter.count()) / 1e9;
            j["loss"] = d.netem.loss.probability;
            j["rate"] = d.netem.rate_bps;
            j["limit"] = d.netem.limit_packets;
        } else if (q.kind == "tbf") {
            summary = "rate " + units::format_rate(netem::decode_tbf_rate(q.options));
            j["rate"] = netem::decode_tbf_rate(q.options);
        }
        j["summary"] = summary;
        qdiscs.push_back(j);
        if (!o.json)
            std::printf("qdisc %s %s %s %s\n", q.kind.c_str(), j["handle"].get<std::string>().c_str(),
                        j["parent"].get<std::string>().c_str(), summary.c_str());
    }
    if (o.json) std::puts(nlohmann::json{{"dev", o.dev}, {"qdiscs", qdiscs}}.dump(2).c_str());
    if (!o.json && fs::exists(snapshot_path(o)))
        std::printf("(changed by wanlab; `wanlab link clear --dev %s` restores the previous qdiscs)\n", o.dev.c_str());
    return 0;
}

}  // namespace

Runner setup_link(CLI::App& sub) {
    auto o = std::make_shared<LinkOptions>();
    auto action = std::make_shared<std::string>();
    sub.require_subcommand(1);
    auto common = [o](CLI::App* app) {
        // Both names become paths under /run/wanlab and words in printed commands.
        app->add_option("--dev", o->dev, "Network device")
            ->required()
            ->check(CLI::Validator([](std::string& v) { return sys::device_name_problem(v); }, "DEV"));
        app->add_option("--netns", o->netns, "Network namespace (as `ip netns` names it) the device is in")
            ->check(CLI::Validator([](std::string& v) { return sys::netns_name_problem(v); }, "NAME"));
    };
    CLI::App* a =
        sub.add_subcommand("apply", "Put link conditions on a device (replacing what wanlab put there before)");
    common(a);
    // Every [link] key that takes one value (tables such as slot are for experiment files).
    for (const auto& attr : netem::attributes()) {
        if (!attr.flag) continue;
        const char* key = attr.key;
        add_key_option(*a, key, fmt::format("[link] {}: {} (see docs/experiment-format.md)", key, value_of(key)),
                       [o, key](const std::string& v) { o->values[key] = v; });
    }
    a->add_option("--profile", o->profile, "A link profile to start from (profiles/link/NAME.toml)");
    a->add_option("--mtu", o->mtu, "MTU the netem limit is sized for (bytes)");
    a->add_flag("--dry-run", o->dry_run, "Print the equivalent tc commands and change nothing");
    a->add_flag("--force", o->force, "Impair the device even if it carries an SSH session");
    a->add_option("--auto-restore", o->auto_restore_s,
                  "Undo the change after SECONDS, even if wanlab or your session is gone (a detached watchdog)")
        ->type_name("SECONDS")
        ->check(CLI::Range(1u, 86400u));
    a->final_callback([action] { *action = "apply"; });
    CLI::App* s = sub.add_subcommand("show", "Show the device's qdiscs as the kernel reports them");
    common(s);
    s->add_flag("--json", o->json, "JSON, base units");
    s->final_callback([action] { *action = "show"; });
    CLI::App* c = sub.add_subcommand("clear", "Give the device back the qdiscs it had before `link apply`");
    common(c);
    c->final_callback([action] { *action = "clear"; });
    return [o, action] {
        if (*action == "apply") return apply(*o);
        if (*action == "show") return show(*o);
        return clear(*o);
    };
}

}  // namespace wanlab::cli
