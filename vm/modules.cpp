#include "vm/modules.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"

namespace wanlab::vm {

namespace {

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
    return s;
}

std::vector<std::string> split_words(std::string_view s) {
    std::vector<std::string> words;
    while (true) {
        s = trim(s);
        if (s.empty()) break;
        auto end = s.find_first_of(" \t");
        words.emplace_back(s.substr(0, end));
        if (end == std::string_view::npos) break;
        s.remove_prefix(end);
    }
    return words;
}

template <class F>
void for_each_line(std::string_view text, F&& f) {
    std::size_t line_no = 0;
    while (!text.empty()) {
        auto nl = text.find('\n');
        ++line_no;
        f(text.substr(0, nl), line_no);
        if (nl == std::string_view::npos) break;
        text.remove_prefix(nl + 1);
    }
}

}  // namespace

std::string module_name(std::string_view path) {
    if (auto slash = path.rfind('/'); slash != std::string_view::npos) path.remove_prefix(slash + 1);
    for (std::string_view ext : {".ko.xz", ".ko.zst", ".ko.gz", ".ko"}) {
        if (path.size() > ext.size() && path.substr(path.size() - ext.size()) == ext) {
            path.remove_suffix(ext.size());
            break;
        }
    }
    std::string name(path);
    std::replace(name.begin(), name.end(), '-', '_');
    return name;
}

ModuleIndex ModuleIndex::parse(std::string_view modules_dep, std::string_view modules_builtin) {
    ModuleIndex index;
    for_each_line(modules_dep, [&](std::string_view line, std::size_t line_no) {
        line = trim(line);
        if (line.empty() || line.front() == '#') return;
        auto colon = line.find(':');
        if (colon == std::string_view::npos || colon == 0)
            throw Error(fmt::format("modules.dep:{}: expected 'path: dependencies', got '{}'", line_no, line));
        std::string path(trim(line.substr(0, colon)));
        index.path_by_name_[module_name(path)] = path;
        index.deps_by_path_[path] = split_words(line.substr(colon + 1));
    });
    for_each_line(modules_builtin, [&](std::string_view line, std::size_t) {
        line = trim(line);
        if (!line.empty()) index.builtin_.insert(module_name(line));
    });
    return index;
}

std::string ModuleIndex::path_of(std::string_view name) const {
    auto it = path_by_name_.find(module_name(name));
    return it == path_by_name_.end() ? std::string() : it->second;
}

std::vector<std::string> ModuleIndex::loadable_with_prefix(std::string_view prefix) const {
    std::vector<std::string> out;
    for (auto it = path_by_name_.lower_bound(prefix); it != path_by_name_.end() && it->first.starts_with(prefix); ++it)
        out.push_back(it->first);
    return out;
}

bool ModuleIndex::is_builtin(std::string_view name) const { return builtin_.count(module_name(name)) != 0; }

void ModuleIndex::visit(const std::string& path, std::set<std::string>& seen, std::set<std::string>& active,
                        std::vector<std::string>& order) const {
    if (seen.count(path) != 0) return;
    if (!active.insert(path).second) throw Error(fmt::format("modules.dep: dependency cycle through {}", path));
    if (auto it = deps_by_path_.find(path); it != deps_by_path_.end())
        for (const auto& dep : it->second) visit(dep, seen, active, order);
    active.erase(path);
    seen.insert(path);
    order.push_back(path);
}

ModuleIndex::Resolution ModuleIndex::resolve(const std::vector<std::string>& wanted) const {
    Resolution r;
    std::set<std::string> seen, active;
    for (const auto& name : wanted) {
        if (std::string path = path_of(name); !path.empty())
            visit(path, seen, active, r.load_order);
        else if (is_builtin(name))
            r.builtin.push_back(module_name(name));
        else
            r.missing.push_back(module_name(name));
    }
    return r;
}

Offered offered(const ModuleIndex& index, const std::vector<std::string>& loaded) {
    Offered o{{"reno"}, {"pfifo", "bfifo", "pfifo_fast", "pfifo_head_drop"}};
    auto take = [&o](std::string_view name) {
        if (name.starts_with("tcp_") && name != "tcp_diag") o.congestion_controls.emplace(name.substr(4));
        if (name.starts_with("sch_")) o.qdiscs.emplace(name.substr(4));
    };
    for (const auto& name : index.builtin_names()) take(name);
    for (const auto& wanted : loaded)
        if (auto name = module_name(wanted); index.is_builtin(name) || !index.path_of(name).empty()) take(name);
    return o;
}

}  // namespace wanlab::vm
