#include "results/records.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "results/store.h"

namespace wanlab::results::record {
namespace {

using nlohmann::json;

// The record a pointer to a member belongs to.
template <class M>
struct member;
template <class C, class V>
struct member<V C::*> {
    using record = C;
};
template <auto M>
using record_of = typename member<decltype(M)>::record;

// A member that is its own JSON value (text, an integer, a struct with to_json/from_json).
template <auto M>
json value(const record_of<M>& r) {
    return r.*M;
}
template <auto M>
void value_of(record_of<M>& r, const json& j) {
    j.get_to(r.*M);
}
// A double, NaN as null.
template <auto M>
json real(const record_of<M>& r) {
    return number(r.*M);
}
template <auto M>
void real_of(record_of<M>& r, const json& j) {
    r.*M = number_from(j);
}

// A column of `storage` kept in the member M (itself its JSON value), under its SQL name in the
// export too.
template <auto M>
constexpr Column<record_of<M>> column_of(const char* name, const char* decl, Storage storage) {
    return {name, decl, name, storage, 1, "", "", "", value<M>, value_of<M>};
}
template <auto M>
constexpr auto text(const char* name, const char* decl = "TEXT NOT NULL") {
    return column_of<M>(name, decl, Storage::text);
}
template <auto M>
constexpr auto integer(const char* name, const char* decl = "INTEGER NOT NULL") {
    return column_of<M>(name, decl, Storage::integer);
}
template <auto M>
constexpr auto real_column(const char* name) {
    return Column<record_of<M>>{name, "REAL", name, Storage::real, 1, "", "", "", real<M>, real_of<M>};
}
template <auto M>
constexpr auto json_text(const char* name, const char* decl = "TEXT NOT NULL") {
    return column_of<M>(name, decl, Storage::json);
}

const Column<Run> kRunColumns[] = {
    text<&Run::id>("id", "TEXT PRIMARY KEY"),
    text<&Run::experiment>("experiment"),
    text<&Run::file>("file"),
    text<&Run::text>("text"),
    json_text<&Run::sets>("sets").commented("JSON array of the --set arguments, in order"),
    text<&Run::baseline>("baseline"),
    text<&Run::started>("started").commented("ISO 8601 UTC"),
    text<&Run::finished>("finished").commented("'' while running"),
    text<&Run::status>("status").commented("running, complete, interrupted, failed"),
    text<&Run::error>("error"),
    integer<&Run::planned_trials>("planned_trials"),
    json_text<&Run::env>("env").commented("JSON: hostname kernel machine wanlab_version where sysctls_before"),
    text<&Run::shard>("shard", "TEXT NOT NULL DEFAULT ''")
        .added(4, "''")
        .commented("since version 4: K/N of a run of --shard K/N; empty: every trial"),
    json_text<&Run::sessions>("sessions", "TEXT NOT NULL DEFAULT '[]'")
        .added(5, "'[]'")
        .noted("JSON array: started finished status error hostname kernel where note; since version 5"),
    json_text<&Run::repeats>("repeats", "TEXT NOT NULL DEFAULT '{}'")
        .added(6, "'{}'")
        .noted("JSON: {} for a fixed count, else rule first max precision ([run] repeats = \"auto\"); since version 6"),
};

const Column<Trial> kTrialColumns[] = {
    integer<&Trial::index>("idx").keyed("index").commented("1-based position in the plan"),
    text<&Trial::id>("id"),
    text<&Trial::variant>("variant"),
    json_text<&Trial::sweep>("sweep").commented("JSON [[path, value], ...] in plan order"),
    real_column<&Trial::link_rtt>("link_rtt").commented("seconds, both directions; NULL: none"),
    real_column<&Trial::link_rate>("link_rate").commented("bit/s, slowest direction; NULL: none"),
    real_column<&Trial::link_loss>("link_loss")
        .commented("random loss fraction, client to server; NULL: another model"),
    real_column<&Trial::link_loss_down>("link_loss_down")
        .added(3, "NULL")
        .commented("the same, server to client; since version 3"),
    json_text<&Trial::sysctls>("sysctls").commented("JSON {\"host:key\": value}"),
    json_text<&Trial::check>("emulation_check")
        .keyed("check")
        .commented("JSON: checked, held, rtt_/rate_configured/measured, note"),
    text<&Trial::status>("status").commented("pending, done, interrupted, failed"),
    text<&Trial::error>("error"),
    json_text<&Trial::captures>("captures", "TEXT NOT NULL DEFAULT '[]'")
        .added(3, "'[]'")
        .noted("JSON array: probe, host, dev, path, packets, bytes, dropped, stopped; since version 3"),
    text<&Trial::origin>("origin", "TEXT NOT NULL DEFAULT ''")
        .added(5, "''")
        .commented("since version 5: the run it was measured in (results merge); '' = this one"),
    integer<&Trial::session>("session", "INTEGER NOT NULL DEFAULT 0")
        .added(5, "0")
        .commented("since version 5: runs.sessions' 1-based index; 0 = not recorded"),
};

// Counters are an object or nothing: anything else reads as {}.
void counters_of(Measurement& m, const json& j) { m.counters = j.is_object() ? j : json::object(); }

const Column<Measurement> kMeasurementColumns[] = {
    integer<&Measurement::trial>("trial").commented("trials.idx"),
    text<&Measurement::probe>("probe"),
    text<&Measurement::kind>("kind"),
    text<&Measurement::tool>("tool"),
    integer<&Measurement::repeat>("repeat").commented("1-based"),
    text<&Measurement::started>("started"),
    json_text<&Measurement::notes>("notes").commented("JSON array of text"),
    json_text<&Measurement::connections>("connections").noted("JSON array, per connection as the probe reported it"),
    {"counters", "TEXT NOT NULL DEFAULT '{}'", "counters", Storage::json, 2, "'{}'", "",
     "JSON: kernel counter deltas per lab host and cpu_busiest; since version 2", value<&Measurement::counters>,
     counters_of},
};

// CREATE TABLE's comments after a column start at this column, or one space after it.
constexpr std::size_t kCommentColumn = 35;

}  // namespace

const Table<Run>& runs() {
    static const Table<Run> t{"runs", "", kRunColumns, ""};
    return t;
}

const Table<Trial>& trials() {
    static const Table<Trial> t{"trials", "    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n",
                                kTrialColumns, "    PRIMARY KEY (run_id, idx)\n"};
    return t;
}

const Table<Measurement>& measurements() {
    static const Table<Measurement> t{"measurements",
                                      "    id INTEGER PRIMARY KEY,\n"
                                      "    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n",
                                      kMeasurementColumns, ""};
    return t;
}

template <class Record>
std::string create_table(const Table<Record>& t) {
    std::string out = fmt::format("CREATE TABLE {} (\n{}", t.name, t.head);
    for (std::size_t i = 0; i < t.columns.size(); ++i) {
        const auto& c = t.columns[i];
        if (*c.above) out += fmt::format("    -- {}\n", c.above);
        bool more = i + 1 < t.columns.size() || *t.tail;
        std::string line = fmt::format("    {} {}{}", c.name, c.decl, more ? "," : "");
        if (*c.comment)
            line +=
                std::string(line.size() < kCommentColumn ? kCommentColumn - line.size() : 1, ' ') + "-- " + c.comment;
        out += line + "\n";
    }
    return out + t.tail + ");\n";
}

template <class Record>
std::string column_list(const Table<Record>& t, int version) {
    std::string out;
    for (const auto& c : t.columns)
        out += fmt::format("{}{}", out.empty() ? "" : ", ", c.since > version ? c.older : c.name);
    return out;
}

template <class Record>
json to_json(const Table<Record>& t, const Record& r) {
    json j = json::object();
    for (const auto& c : t.columns) j[c.key] = c.get(r);
    return j;
}

template <class Record>
void from_json(const Table<Record>& t, const json& j, Record& r) {
    for (const auto& c : t.columns) {
        if (c.since > 1 && !j.contains(c.key)) continue;  // an older export
        c.set(r, j.at(c.key));
    }
}

template <class Record>
const Column<Record>& column(const Table<Record>& t, std::string_view name) {
    auto it = std::find_if(t.columns.begin(), t.columns.end(), [&](const auto& c) { return c.name == name; });
    if (it == t.columns.end()) throw std::out_of_range(fmt::format("no column `{}` in table {}", name, t.name));
    return *it;
}

#define WANLAB_RECORD(R)                                       \
    template std::string create_table(const Table<R>&);        \
    template std::string column_list(const Table<R>&, int);    \
    template json to_json(const Table<R>&, const R&);          \
    template void from_json(const Table<R>&, const json&, R&); \
    template const Column<R>& column(const Table<R>&, std::string_view);
WANLAB_RECORD(Run)
WANLAB_RECORD(Trial)
WANLAB_RECORD(Measurement)
#undef WANLAB_RECORD

}  // namespace wanlab::results::record
