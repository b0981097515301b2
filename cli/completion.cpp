// `wanlab completion bash|zsh`: shell completion scripts generated from the command line
// itself (the command table and each command's CLI11 options), so they cannot go stale. The
// build runs it and `cmake --install` installs the scripts (cli/CMakeLists.txt). Hidden
// commands and options (group "", such as the underscore aliases) are not offered.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/load.h"
#include "core/error.h"
#include "experiment/profiles.h"
#include "probes/probe_spec.h"
#include "results/store.h"

namespace wanlab::cli {
namespace {

struct Word {
    std::string name, help;
    bool takes_value = false;
    /// What its value is, when a list can be offered: fixed words ("table csv json"), or
    /// "@runs", "@profiles", "@examples" for `wanlab completion words WHAT` to list then.
    std::string values;
};

// One command on the path from `wanlab` down, with what may follow it.
struct Level {
    std::string path;  ///< "wanlab results show"
    std::vector<Word> subcommands, options;
    std::string positional;  ///< what its positional arguments are, as Word::values
};

bool shown(const CLI::Option* o) { return !o->get_group().empty() && o->nonpositional(); }

// An option's fixed choices, from its CLI::IsMember check ("{table,csv,json}"), as words.
std::string choices_of(const CLI::Option* o) {
    std::string d;
    try {
        auto* v = const_cast<CLI::Option*>(o)->get_validator(0);
        if (v) d = v->get_description();
    } catch (const CLI::Error&) {
        return "";  // no check: no list
    }
    if (d.size() < 2 || d.front() != '{' || d.back() != '}') return "";
    std::string words = d.substr(1, d.size() - 2);
    std::replace(words.begin(), words.end(), ',', ' ');
    return words;
}

// What a value is, by the name that says it: a run, a profile, an experiment file.
std::string values_of(const std::string& path, const std::string& name) {
    if (name == "--resume" || name.starts_with("RUN")) return "@runs";
    if (name == "--profile" || (path == "wanlab profiles" && name == "NAME")) return "@profiles";
    if (name == "FILE") return "@examples";
    if (path == "wanlab probe" && name == "kind") {
        std::string kinds;
        for (const auto& k : probes::probe_kinds()) kinds += (kinds.empty() ? "" : " ") + std::string(k.name);
        return kinds;
    }
    return "";
}

void walk(const CLI::App& app, const std::string& path, std::vector<Level>& out) {
    Level level{path, {}, {}, ""};
    // `wanlab probe`'s per-kind options are left out of its --help (`wanlab help probe KIND`
    // lists a kind's), not out of completion; their underscore aliases are.
    auto offered = [&path](const CLI::Option* o) {
        if (shown(o)) return true;
        if (path != "wanlab probe" || !o->nonpositional()) return false;
        const auto& names = o->get_lnames();
        return !names.empty() && names.front().find('_') == std::string::npos && !names.front().starts_with("capture");
    };
    for (const CLI::Option* o : app.get_options(offered))
        for (const auto& name : o->get_lnames()) {
            auto values = choices_of(o);
            if (values.empty()) values = values_of(path, "--" + name);
            level.options.push_back({"--" + name, o->get_description(), o->get_items_expected_max() > 0, values});
        }
    for (const CLI::Option* o : app.get_options([](const CLI::Option* x) { return x->get_positional(); }))
        if (auto v = values_of(path, o->get_name()); !v.empty() && level.positional.empty()) level.positional = v;
    auto subs = app.get_subcommands([](const CLI::App* s) { return !s->get_group().empty(); });
    for (const CLI::App* s : subs) level.subcommands.push_back({s->get_name(), s->get_description(), false, ""});
    out.push_back(level);
    for (const CLI::App* s : subs) walk(*s, path + " " + s->get_name(), out);
}

// A Word::values as a shell expression of words: fixed ones as they are, the others asked of
// wanlab itself when the user presses tab.
std::string words_expression(const std::string& name, const std::string& values) {
    if (values.starts_with('@')) return fmt::format("$({} completion words {} 2>/dev/null)", name, values.substr(1));
    return values;
}

std::vector<Level> levels(const CLI::App& app) {
    std::vector<Level> out;
    walk(app, app.get_name(), out);
    return out;
}

/// `text` in single quotes for a shell.
std::string sh_quoted(const std::string& text) {
    std::string out = "'";
    for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

/// The case patterns `LEVEL WORD` for each sub-command, or each option taking a value.
/// `separator` is " | " for bash, "|" for zsh.
std::string patterns(const std::vector<Level>& all, bool subcommands, const char* separator) {
    std::string out;
    for (const auto& l : all)
        for (const auto& w : subcommands ? l.subcommands : l.options)
            if (subcommands || w.takes_value) out += (out.empty() ? "" : separator) + sh_quoted(l.path + " " + w.name);
    return out.empty() ? "''" : out;
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

}  // namespace

std::string bash_completion(const CLI::App& app) {
    const auto all = levels(app);
    const std::string name = app.get_name();
    std::string words;
    for (const auto& l : all) {
        std::string list;
        for (const auto& w : l.subcommands) list += (list.empty() ? "" : " ") + w.name;
        for (const auto& w : l.options) list += (list.empty() ? "" : " ") + w.name;
        words += fmt::format("        {}) words=\"{}{}\" ;;\n", sh_quoted(l.path), list,
                             l.positional.empty() ? "" : " " + words_expression(name, l.positional));
    }
    // An option whose value wanlab can list: its words instead of files.
    std::string values;
    for (const auto& l : all)
        for (const auto& w : l.options)
            if (w.takes_value && !w.values.empty())
                values += fmt::format("    {}) COMPREPLY=($(compgen -W \"{}\" -- \"$cur\")); return 0 ;;\n",
                                      sh_quoted(l.path + " " + w.name), words_expression(name, w.values));
    return fmt::format(
        "# bash completion for {0}; generated by `{0} completion bash` from its command table.\n"
        "_{0}() {{\n"
        "    local cur=${{COMP_WORDS[COMP_CWORD]}} prev=${{COMP_WORDS[COMP_CWORD-1]}} cmd={0} words='' i\n"
        "    for ((i = 1; i < COMP_CWORD; i++)); do\n"
        "        [[ ${{COMP_WORDS[i]}} == -- ]] && return 0\n"
        "        case \"$cmd ${{COMP_WORDS[i]}}\" in\n"
        "        {1}) cmd=\"$cmd ${{COMP_WORDS[i]}}\" ;;\n"
        "        esac\n"
        "    done\n"
        "    # An option's value: its choices, runs or profiles where wanlab knows them; else files (-o default).\n"
        "    case \"$cmd $prev\" in\n"
        "{4}"
        "    {2}) return 0 ;;\n"
        "    esac\n"
        "    case $cmd in\n"
        "{3}"
        "    esac\n"
        "    COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
        "}}\n"
        "complete -o default -F _{0} {0}\n",
        name, patterns(all, true, " | "), patterns(all, false, " | "), words, values);
}

std::string zsh_completion(const CLI::App& app) {
    const auto all = levels(app);
    const std::string name = app.get_name();
    std::string items;
    for (const auto& l : all) {
        std::string list;
        for (const auto& group : {l.subcommands, l.options})
            for (const auto& w : group) list += " " + sh_quoted(w.name + ":" + first_line(w.help));
        std::string more;
        if (!l.positional.empty())
            more = fmt::format(" ${{(f)\"$(print -l {})\"}}", words_expression(name, l.positional));
        items += fmt::format("    ({}) items=({}{} ) ;;\n", sh_quoted(l.path), list, more);
    }
    std::string values;
    for (const auto& l : all)
        for (const auto& w : l.options)
            if (w.takes_value && !w.values.empty())
                values += fmt::format("  ({}) compadd -- {}; return ;;\n", sh_quoted(l.path + " " + w.name),
                                      words_expression(name, w.values));
    return fmt::format(
        "#compdef {0}\n"
        "# zsh completion for {0}; generated by `{0} completion zsh` from its command table.\n"
        "_{0}() {{\n"
        "  local cmd={0} i\n"
        "  local -a items\n"
        "  for ((i = 2; i < CURRENT; i++)); do\n"
        "    [[ ${{words[i]}} == -- ]] && return 0\n"
        "    case \"$cmd ${{words[i]}}\" in\n"
        "    ({1}) cmd=\"$cmd ${{words[i]}}\" ;;\n"
        "    esac\n"
        "  done\n"
        "  case \"$cmd ${{words[CURRENT-1]}}\" in\n"
        "{4}"
        "  ({2}) _files; return ;;\n"
        "  esac\n"
        "  case $cmd in\n"
        "{3}"
        "  esac\n"
        "  _describe -t commands {0} items\n"
        "}}\n"
        "if [[ $funcstack[1] == _{0} ]]; then _{0} \"$@\"; else compdef _{0} {0}; fi\n",
        name, patterns(all, true, "|"), patterns(all, false, "|"), items, values);
}

std::vector<std::string> completion_words(const std::string& what, const std::filesystem::path& results) {
    std::vector<std::string> out;
    if (what == "examples") return example_names();
    if (what == "profiles") {
        auto lib = experiment::ProfileLibrary::standard();
        for (const char* kind : {"link", "tuning"})
            for (auto& n : lib.names(kind)) out.push_back(std::move(n));
        std::sort(out.begin(), out.end());
        out.erase(std::unique(out.begin(), out.end()), out.end());
        return out;
    }
    if (what == "runs") {
        std::error_code ec;
        if (!std::filesystem::exists(results / "results.db", ec)) return out;
        try {
            results::Store store(results / "results.db", results::Store::Access::read_only);
            for (const auto& r : store.list_runs()) out.push_back(r.id);
            if (!out.empty()) out.insert(out.begin(), "latest");
        } catch (const std::exception&) {
            // not a database wanlab can read: nothing to offer
        }
        return out;
    }
    throw InputError(fmt::format("completion words: `{}` is none of runs, profiles, examples", what));
}

Runner setup_completion(CLI::App& sub) {
    auto shell = std::make_shared<std::string>();
    auto what = std::make_shared<std::string>();
    sub.add_option("SHELL", *shell, "bash or zsh, or `words` (what a script asks when tab is pressed)")
        ->required()
        ->check(CLI::IsMember({"bash", "zsh", "words"}));
    sub.add_option("WHAT", *what, "with `words`: runs (in ./wanlab-results), profiles or examples");
    const CLI::App* root = sub.get_parent();
    return [shell, what, root] {
        if (*shell == "words") {
            for (const auto& w : completion_words(*what, "wanlab-results")) std::puts(w.c_str());
            return 0;
        }
        std::fputs((*shell == "bash" ? bash_completion(*root) : zsh_completion(*root)).c_str(), stdout);
        return 0;
    };
}

}  // namespace wanlab::cli
