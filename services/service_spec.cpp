#include "services/service_spec.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "core/error.h"
#include "core/placeholders.h"
#include "core/sys.h"
#include "core/text.h"

namespace wanlab::services {
namespace {

using config::Node;
using config::Reader;
using namespace std::chrono_literals;

// A file name in the trial's folder: no path, nothing hidden, nothing a shell or a log
// reader would misread.
bool valid_file_name(const std::string& s) {
    return !s.empty() && s.size() <= 128 && s.front() != '.' && std::all_of(s.begin(), s.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
    });
}

/// An array of strings, each located; nullopt (reported) for anything else.
std::optional<std::vector<std::string>> strings(const Node* n, const std::string& what, Diagnostics& diag) {
    if (!n) return std::nullopt;
    const toml::array* arr = n->kind == Node::Kind::value ? n->value->as_array() : nullptr;
    if (!arr) {
        diag.error(n->value_at, fmt::format("`{}` must be an array of strings (argv, never a shell string), such as "
                                            "[\"nginx\", \"-c\", \"{{dir}}/nginx.conf\"]",
                                            what));
        return std::nullopt;
    }
    std::vector<std::string> out;
    for (std::size_t i = 0; i < arr->size(); ++i) {
        auto s = (*arr)[i].value_exact<std::string>();
        if (!s) {
            diag.error(config::element(*n, i).value_at, fmt::format("`{}` must hold strings only; element {} is {}",
                                                                    what, i + 1, config::describe((*arr)[i])));
            return std::nullopt;
        }
        out.push_back(*s);
    }
    if (out.empty() || out.front().empty()) {
        diag.error(n->value_at, fmt::format("`{}` needs at least the program to run", what));
        return std::nullopt;
    }
    return out;
}

ReadyCheck parse_ready(const Node* table, const std::string& section, Diagnostics& diag) {
    ReadyCheck c;
    if (!table) return c;
    Reader r(*table, section + " ready", diag);
    int kinds = 0;
    if (auto p = r.integer("port", 1, 65535)) c.kind = ReadyCheck::Kind::port, c.port = static_cast<std::uint16_t>(*p);
    if (auto a = r.string("address")) c.address = *a;
    if (auto cmd = strings(r.raw("command"), "ready.command", diag))
        c.kind = ReadyCheck::Kind::command, c.command = *cmd;
    if (auto d = r.duration("delay", 0ns, std::chrono::minutes(10))) c.kind = ReadyCheck::Kind::delay, c.delay = *d;
    if (auto t = r.duration("timeout", 1ms, std::chrono::hours(1))) c.timeout = *t;
    for (const char* k : {"port", "command", "delay"}) kinds += r.has(k) ? 1 : 0;
    if (kinds != 1)
        diag.error(table->value_at, fmt::format("{} `ready` needs exactly one of `port` (a TCP port that accepts), "
                                                "`command` (exits 0) or `delay`",
                                                section));
    if (r.has("address") && !r.has("port")) diag.error(r.key_at("address"), "`ready.address` goes with `ready.port`");
    if (r.has("timeout") && r.has("delay") && !r.has("port") && !r.has("command"))
        diag.error(r.key_at("timeout"), "`ready.timeout` bounds a port or command check, not a delay");
    r.finish();
    return c;
}

// The location of byte `offset` of a template, for a caret under its placeholder.
Location template_location(const std::string& file, const std::string& text, std::size_t offset) {
    Location at{file, 1, 1, 0};
    for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
        if (text[i] == '\n')
            ++at.line, at.column = 1;
        else
            ++at.column;
    }
    return at;
}

std::vector<TemplateFile> parse_files(const Node* table, const std::string& section, const std::filesystem::path& base,
                                      Diagnostics& diag) {
    std::vector<TemplateFile> files;
    if (!table) return files;
    for (const auto& [name, source] : table->members) {
        auto path = source.kind == Node::Kind::value ? source.value->value_exact<std::string>() : std::nullopt;
        if (!valid_file_name(name)) {
            diag.error(source.key_at, fmt::format("{} file name \"{}\" must be a plain file name in {{dir}} (letters, "
                                                  "digits, `.`, `-`, `_`; not hidden, no `/`)",
                                                  section, name));
            continue;
        }
        if (!path || path->empty()) {
            diag.error(source.value_at, fmt::format("{} `files.{}` must be the template's path, relative to the "
                                                    "experiment file",
                                                    section, name));
            continue;
        }
        TemplateFile f;
        f.name = name;
        f.at = source.value_at;
        std::filesystem::path p(*path);
        f.source = (p.is_absolute() ? p : base / p).lexically_normal().string();
        try {
            f.text = sys::read_file(f.source, sys::kMaxInputBytes, fmt::format("template of {}", section));
        } catch (const Error& e) {
            diag.error(source.value_at, e.what());
            continue;
        }
        // A template read from a file only its owner may read (a key) stays that way rendered.
        if (struct stat st{}; ::stat(f.source.c_str(), &st) == 0) f.mode = st.st_mode & 0777;
        if (f.text.find('\0') != std::string::npos) {
            diag.error(source.value_at, fmt::format("the template {} holds a NUL byte: templates are text", f.source));
            continue;
        }
        files.push_back(std::move(f));
    }
    return files;
}

std::map<std::string, std::string> parse_vars(const Node* table, const std::string& section, Diagnostics& diag) {
    std::map<std::string, std::string> vars;
    if (!table) return vars;
    for (const auto& [name, value] : table->members) {
        if (!text::valid_placeholder_name(name)) {
            diag.error(value.key_at, fmt::format("{} var `{}`: a placeholder name is a letter or `_`, then letters, "
                                                 "digits or `_`",
                                                 section, name));
            continue;
        }
        if (std::find(kPlaceholders.begin(), kPlaceholders.end(), name) != kPlaceholders.end()) {
            diag.error(value.key_at, fmt::format("{} var `{}` would hide wanlab's own {{{}}}", section, name, name));
            continue;
        }
        const toml::node* v = value.kind == Node::Kind::value ? value.value : nullptr;
        if (v && v->is_string())
            vars[name] = *v->value_exact<std::string>();
        else if (v && v->is_integer())
            vars[name] = std::to_string(*v->value_exact<std::int64_t>());
        else if (v && v->is_boolean())
            vars[name] = *v->value_exact<bool>() ? "true" : "false";
        else
            diag.error(value.value_at, fmt::format("{} var `{}` must be a string, an integer or a boolean, not {}",
                                                   section, name, config::describe(value)));
    }
    return vars;
}

void check_placeholders(const ServiceSpec& s, const Node& table, config::Documents* docs, Diagnostics& diag) {
    auto known = placeholder_names(s);
    std::size_t at = 0;
    auto check_argv = [&](const std::vector<std::string>& argv, const Node* node, const char* what) {
        if (!node) return;
        for (std::size_t i = 0; i < argv.size(); ++i) {
            if (i == 0 && !text::placeholders(argv[0]).empty()) {
                diag.error(config::element(*node, 0).value_at,
                           fmt::format("the program of `{}` takes no placeholder: name it, or give its path", what));
                continue;
            }
            if (auto why = text::unknown_placeholder(argv[i], known, at); !why.empty())
                diag.error(config::element(*node, i).value_at, fmt::format("`{}` element {}: {}", what, i + 1, why));
        }
    };
    check_argv(s.command, table.find("command"), "command");
    if (const Node* ready = table.find("ready"); ready && ready->is_table())
        check_argv(s.ready.command, ready->find("command"), "ready.command");
    for (const auto& f : s.files) {
        if (auto why = text::unknown_placeholder(f.text, known, at); !why.empty()) {
            if (docs) docs->sources().add(f.source, f.text);
            diag.error(template_location(f.source, f.text, at), fmt::format("template of `{}`: {}", f.name, why));
        }
    }
}

}  // namespace

std::vector<std::string> placeholder_names(const ServiceSpec& s) {
    auto names = kPlaceholders;
    for (const auto& [k, v] : s.vars) names.push_back(k);
    return names;
}

ServiceSpec parse_service(const Node& table, std::size_t index, const std::vector<std::string>& hosts,
                          const std::filesystem::path& base, config::Documents* docs, Diagnostics& diag) {
    ServiceSpec s;
    s.at = table.value_at;
    std::string section = fmt::format("[[service]] #{}", index + 1);
    Reader r(table, section, diag);
    if (auto name = r.string("name")) {
        if (text::valid_name(*name)) {
            s.name = *name;
            section = fmt::format("[[service]] \"{}\"", s.name);
        } else {
            diag.error(r.value_at("name"),
                       fmt::format("service name \"{}\" must be 1-64 letters, digits, `-` or `_`", *name));
        }
    } else if (!r.has("name")) {
        diag.error(table.value_at, fmt::format("{} needs a `name` (it names the service's log files)", section));
    }
    s.host = hosts.size() == 1 ? hosts.front() : "server";
    if (auto h = r.choice("host", hosts)) s.host = *h;
    if (auto cmd = strings(r.raw("command"), "command", diag)) s.command = *cmd;
    if (!r.has("command"))
        diag.error(table.value_at,
                   fmt::format("{} needs a `command`: its argv, such as [\"iperf3\", \"-s\"]", section));
    s.ready = parse_ready(r.table("ready"), section, diag);
    if (auto t = r.duration("stop_timeout", 0ns, std::chrono::minutes(10))) s.stop_timeout = *t;
    s.vars = parse_vars(r.table("vars"), section, diag);
    s.files = parse_files(r.table("files"), section, base, diag);
    r.finish();
    check_placeholders(s, table, docs, diag);
    return s;
}

}  // namespace wanlab::services
