// Kernel module lookup through depmod's files (modules.dep, modules.builtin), as modprobe
// does it, without touching the running kernel.
//
// Contract: module names are normalised the way the kernel does ('-' and '_' are the same);
// a module's path is relative to the modules directory (/lib/modules/<version>). resolve()
// returns every module to load for the wanted names, each exactly once, dependencies before
// the modules that need them; names built into the kernel (modules.builtin) need nothing,
// and names the kernel has in neither form are reported, not fatal. Pure; thread-compatible.
#pragma once

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace wanlab::vm {

/// "kernel/net/sched/sch_netem.ko.xz" -> "sch_netem"; "virtio-rng" -> "virtio_rng".
std::string module_name(std::string_view path_or_name);

class ModuleIndex {
public:
    /// Parses modules.dep ("path: dep-path dep-path ...") and modules.builtin (one path a
    /// line). Throws wanlab::Error naming the line for a malformed modules.dep line.
    static ModuleIndex parse(std::string_view modules_dep, std::string_view modules_builtin);

    struct Resolution {
        std::vector<std::string> load_order;  // module paths, dependencies first
        std::vector<std::string> builtin;     // wanted names built into the kernel
        std::vector<std::string> missing;     // wanted names the kernel does not have
    };
    Resolution resolve(const std::vector<std::string>& wanted) const;

    /// The module's path, or "" when there is no such loadable module.
    std::string path_of(std::string_view name) const;
    bool is_builtin(std::string_view name) const;
    /// Every loadable module whose name starts with `prefix` ("tcp_": the congestion controls).
    std::vector<std::string> loadable_with_prefix(std::string_view prefix) const;
    /// Every module name built into the kernel, normalised.
    const std::set<std::string, std::less<>>& builtin_names() const { return builtin_; }

private:
    void visit(const std::string& path, std::set<std::string>& seen, std::set<std::string>& active,
               std::vector<std::string>& order) const;

    std::map<std::string, std::string, std::less<>> path_by_name_;
    std::map<std::string, std::vector<std::string>, std::less<>> deps_by_path_;
    std::set<std::string, std::less<>> builtin_;
};

/// What a kernel booted with the modules `loaded` (initramfs.h default_modules()) offers
/// without loading more: congestion controls ("cubic", "bbr") and qdiscs ("netem",
/// "fq_codel"), each built in or among `loaded` and present. reno and the fifos the core
/// scheduler code carries (pfifo, bfifo, pfifo_fast, pfifo_head_drop) are always there.
struct Offered {
    std::set<std::string> congestion_controls, qdiscs;
};
Offered offered(const ModuleIndex& index, const std::vector<std::string>& loaded);

}  // namespace wanlab::vm
