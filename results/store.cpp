#include "results/store.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <fstream>
#include <optional>
#include <span>
#include <utility>

#include <fmt/format.h>
#include <sqlite3.h>

#include "core/error.h"
#include "core/json.h"
#include "core/proc.h"
#include "core/version.h"
#include "results/records.h"

namespace wanlab::results {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;
using record::Storage;

constexpr int kSchemaVersion = 6;
constexpr int kBusyTimeoutMs = 5000;
constexpr std::size_t kCandidatesShown = 5;

// Version 6. Version 1 had no measurements.counters, version 2 no trials.captures and no
// series table, version 3 no runs.shard, version 4 no runs.sessions, trials.origin nor
// trials.session, version 5 no runs.repeats (no comma in a comment between two columns where one is added later:
// SQLite's DROP COLUMN, which the tests use to make older stores, takes it for the column's): ensure_schema() adds
// them, and a read-only store of an older version reads as if they were empty. A later wanlab that changes this bumps
// user_version, migrates, and sets meta.written_by to its own version, so an older wanlab
// can say which one to use.
// runs, trials and measurements come from their descriptions (records.h); the rest follows.
constexpr const char* kChildTables = R"sql(CREATE INDEX measurements_by_trial ON measurements(run_id, trial);
CREATE TABLE metrics (
    measurement_id INTEGER NOT NULL REFERENCES measurements(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    value REAL,                    -- base units; NULL: not measured
    PRIMARY KEY (measurement_id, name)
) WITHOUT ROWID;
CREATE INDEX metrics_by_name ON metrics(name);
CREATE TABLE samples (
    measurement_id INTEGER NOT NULL REFERENCES measurements(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    seq INTEGER NOT NULL,          -- 0-based order within the series
    value REAL,
    PRIMARY KEY (measurement_id, name, seq)
) WITHOUT ROWID;
CREATE TABLE series (              -- since version 3
    measurement_id INTEGER NOT NULL REFERENCES measurements(id) ON DELETE CASCADE,
    name TEXT NOT NULL,            -- "throughput", "stream1.cwnd", "router.up.backlog", ...
    seq INTEGER NOT NULL,          -- 0-based order within the series
    t REAL NOT NULL,               -- seconds since the measurement began
    value REAL,                    -- base units; NULL: not measured
    PRIMARY KEY (measurement_id, name, seq)
) WITHOUT ROWID;
-- One row per (measurement, metric) with its trial's variant, for ad-hoc queries.
CREATE VIEW metric_values AS
    SELECT m.run_id, m.trial, t.variant, m.probe, m.kind, m.tool, m.repeat, x.name AS metric, x.value
    FROM measurements m JOIN metrics x ON x.measurement_id = m.id
    LEFT JOIN trials t ON t.run_id = m.run_id AND t.idx = m.trial;
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
PRAGMA user_version = 6;
)sql";

/// Schema version 6, as a new store gets it.
std::string schema() {
    return "\n" + record::create_table(record::runs()) + record::create_table(record::trials()) +
           record::create_table(record::measurements()) + kChildTables;
}

constexpr const char* kNewestFirst = " ORDER BY started DESC, rowid DESC";

[[noreturn]] void fail(sqlite3* db, const fs::path& path, const std::string& action) {
    // Only a read-only store's time limit (the progress handler) interrupts a statement.
    if (db != nullptr && sqlite3_errcode(db) == SQLITE_INTERRUPT)
        throw Error(fmt::format("results database {}: {}: the database took too long: is it a wanlab results database?",
                                path.string(), action));
    throw Error(fmt::format("results database {}: {}: {}", path.string(), action,
                            db != nullptr ? sqlite3_errmsg(db) : "out of memory"));
}

void exec(sqlite3* db, const fs::path& path, const char* sql, const std::string& action) {
    if (sqlite3_exec(db, sql, nullptr, nullptr, nullptr) != SQLITE_OK) fail(db, path, action);
}

/// JSON text that never throws (invalid UTF-8 is replaced).
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// A prepared statement with its parameters bound in order; sqlite3_finalize on destruction.
class Statement {
public:
    Statement(sqlite3* db, const fs::path& path, const std::string& sql, std::string action)
        : db_(db), path_(path), action_(std::move(action)) {
        if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt_, nullptr) != SQLITE_OK) fail(db_, path_, action_);
    }
    ~Statement() { sqlite3_finalize(stmt_); }
    Statement(const Statement&) = delete;
    Statement& operator=(const Statement&) = delete;

    /// Binds parameters 1..n.
    template <typename... Args>
    Statement& bind(const Args&... args) {
        int i = 0;
        (bind_one(++i, args), ...);
        return *this;
    }
    /// True with a row to read, false when done.
    bool step() {
        int rc = sqlite3_step(stmt_);
        if (rc == SQLITE_ROW) return true;
        if (rc == SQLITE_DONE) return false;
        fail(db_, path_, action_);
    }
    void run() {
        while (step()) {}
    }
    /// Ready to run again with new parameters.
    void reset() {
        sqlite3_reset(stmt_);
        sqlite3_clear_bindings(stmt_);
    }

    std::string text(int col) const {
        auto p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
        return p != nullptr ? std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col))) : "";
    }
    double real(int col) const {
        return sqlite3_column_type(stmt_, col) == SQLITE_NULL ? kNaN : sqlite3_column_double(stmt_, col);
    }
    std::int64_t integer(int col) const { return sqlite3_column_int64(stmt_, col); }
    /// Column `col` as a record's column keeps it (NULL: null; JSON text: parsed).
    json value(int col, Storage storage) const {
        switch (storage) {
            case Storage::text: return text(col);
            case Storage::integer: return integer(col);
            case Storage::real: return record::number(real(col));
            case Storage::json: break;
        }
        return parsed(col);
    }
    /// Sets the record's columns from columns `first`, `first` + 1, ... of the row.
    template <typename Record>
    void read(int first, const record::Table<Record>& table, Record& r) const {
        int col = first;
        for (const auto& c : table.columns) {
            try {
                c.set(r, value(col, c.storage));
            } catch (const json::exception& e) {
                throw Error(fmt::format("results database {}: {}: column {}: {}", path_.string(), action_,
                                        sqlite3_column_name(stmt_, col), e.what()));
            }
            ++col;
        }
    }
    /// Binds the record's columns to parameters `first`, `first` + 1, ...
    template <typename Record>
    Statement& bind_record(int first, const record::Table<Record>& table, const Record& r) {
        int i = first;
        for (const auto& c : table.columns) bind_value(i++, c.storage, c.get(r));
        return *this;
    }
    /// Binds the named columns of the record to parameters `first`, `first` + 1, ...
    template <typename Record>
    Statement& bind_columns(int first, const record::Table<Record>& table, std::span<const char* const> names,
                            const Record& r) {
        int i = first;
        for (const char* name : names) {
            const auto& c = record::column(table, name);
            bind_value(i++, c.storage, c.get(r));
        }
        return *this;
    }
    json parsed(int col) const {
        return json_input::parse_or_throw(text(col), fmt::format("results database {}: {}: column {}", path_.string(),
                                                                 action_, sqlite3_column_name(stmt_, col)));
    }

private:
    void check(int rc) {
        if (rc != SQLITE_OK) fail(db_, path_, action_);
    }
    void bind_one(int i, const std::string& v) {
        check(sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
    }
    void bind_one(int i, const json& v) { bind_one(i, dump(v)); }
    void bind_value(int i, Storage storage, const json& v) {
        switch (storage) {
            case Storage::text: return bind_one(i, v.get_ref<const std::string&>());
            case Storage::integer: return bind_one(i, v.get<std::int64_t>());
            case Storage::real: return bind_one(i, record::number_from(v));
            case Storage::json: return bind_one(i, v);
        }
    }
    void bind_one(int i, double v) {
        check(std::isnan(v) ? sqlite3_bind_null(stmt_, i) : sqlite3_bind_double(stmt_, i, v));
    }
    template <std::integral T>
    void bind_one(int i, T v) {
        check(sqlite3_bind_int64(stmt_, i, static_cast<sqlite3_int64>(v)));
    }

    sqlite3* db_;
    const fs::path& path_;
    std::string action_;
    sqlite3_stmt* stmt_ = nullptr;
};

// BEGIN on construction (IMMEDIATE for writes, so a busy database waits at the start rather
// than failing at COMMIT); ROLLBACK on destruction unless commit() ran.
class Transaction {
public:
    Transaction(sqlite3* db, const fs::path& path, const char* begin, std::string action)
        : db_(db), path_(path), action_(std::move(action)) {
        exec(db_, path_, begin, action_);
    }
    ~Transaction() {
        if (!committed_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    }
    Transaction(const Transaction&) = delete;
    Transaction& operator=(const Transaction&) = delete;

    void commit() {
        exec(db_, path_, "COMMIT", action_);
        committed_ = true;
    }

private:
    sqlite3* db_;
    const fs::path& path_;
    std::string action_;
    bool committed_ = false;
};

int user_version(sqlite3* db, const fs::path& path) {
    Statement s(db, path, "PRAGMA user_version", "reading the schema version");
    return s.step() ? static_cast<int>(s.integer(0)) : 0;
}

/// The wanlab version that wrote a newer schema, or "" if the database does not say.
std::string written_by(sqlite3* db) {
    sqlite3_stmt* stmt = nullptr;
    std::string version;
    if (sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key = 'written_by'", -1, &stmt, nullptr) == SQLITE_OK &&
        sqlite3_step(stmt) == SQLITE_ROW && sqlite3_column_text(stmt, 0) != nullptr)
        version = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    sqlite3_finalize(stmt);
    return version;
}

[[noreturn]] void refuse_newer(sqlite3* db, const fs::path& path, int version) {
    std::string by = written_by(db);
    throw Error(
        fmt::format("results database {} has schema version {}{}; wanlab {} reads up to version {}: "
                    "open it with {}",
                    path.string(), version, by.empty() ? "" : fmt::format(" (written by wanlab {})", by), kVersion,
                    kSchemaVersion, by.empty() ? "a newer wanlab" : fmt::format("wanlab {} or newer", by)));
}

void create_schema(sqlite3* db, const fs::path& path) {
    exec(db, path, schema().c_str(), "creating the schema");
    Statement(db, path, "INSERT INTO meta (key, value) VALUES ('written_by', ?)", "creating the schema")
        .bind(std::string(kVersion))
        .run();
}

void check_tables(sqlite3* db, const fs::path& path, int version);

// Each migration brings the schema from version to - 1 to version `to`.
struct Migration {
    int to;
    const char* sql;
};
constexpr Migration kMigrations[] = {
    {2, "ALTER TABLE measurements ADD COLUMN counters TEXT NOT NULL DEFAULT '{}'; PRAGMA user_version = 2"},
    {3,
     "ALTER TABLE trials ADD COLUMN captures TEXT NOT NULL DEFAULT '[]'; "
     "ALTER TABLE trials ADD COLUMN link_loss_down REAL; "
     "CREATE TABLE series (measurement_id INTEGER NOT NULL REFERENCES measurements(id) ON DELETE CASCADE, "
     "name TEXT NOT NULL, seq INTEGER NOT NULL, t REAL NOT NULL, value REAL, "
     "PRIMARY KEY (measurement_id, name, seq)) WITHOUT ROWID; PRAGMA user_version = 3"},
    {4, "ALTER TABLE runs ADD COLUMN shard TEXT NOT NULL DEFAULT ''; PRAGMA user_version = 4"},
    {5,
     "ALTER TABLE runs ADD COLUMN sessions TEXT NOT NULL DEFAULT '[]'; "
     "ALTER TABLE trials ADD COLUMN origin TEXT NOT NULL DEFAULT ''; "
     "ALTER TABLE trials ADD COLUMN session INTEGER NOT NULL DEFAULT 0; PRAGMA user_version = 5"},
    {6, "ALTER TABLE runs ADD COLUMN repeats TEXT NOT NULL DEFAULT '{}'; PRAGMA user_version = 6"},
};

void ensure_schema(sqlite3* db, const fs::path& path) {
    int version = user_version(db, path);
    if (version > kSchemaVersion) refuse_newer(db, path, version);
    if (version == kSchemaVersion) return;
    Transaction tx(db, path, "BEGIN IMMEDIATE", "creating the schema");
    // Another process may have created or migrated it between the check and the lock.
    int from = user_version(db, path);
    if (from == 0) {
        create_schema(db, path);
    } else if (from < kSchemaVersion) {
        check_tables(db, path, from);
        for (const auto& step : kMigrations)
            if (step.to > from) exec(db, path, step.sql, fmt::format("migrating the schema to version {}", step.to));
        Statement(db, path, "INSERT OR REPLACE INTO meta (key, value) VALUES ('written_by', ?)", "migrating the schema")
            .bind(std::string(kVersion))
            .run();
    }
    tx.commit();
}

// The tables wanlab reads and writes; each must be a real table (a view could recurse forever,
// a virtual table could be anything).
// (name, the version that added it)
constexpr std::pair<const char*, int> kTables[] = {{"runs", 1},    {"trials", 1}, {"measurements", 1}, {"metrics", 1},
                                                   {"samples", 1}, {"meta", 1},   {"series", 3}};

[[noreturn]] void refuse_schema(const fs::path& path, const std::string& why) {
    throw InputError(fmt::format("results database {}: {}: is it a wanlab results database?", path.string(), why));
}

/// The tables of schema `version`.
void check_tables(sqlite3* db, const fs::path& path, int version) {
    Statement s(db, path, "SELECT type, sql FROM sqlite_master WHERE name = ? COLLATE NOCASE", "checking the schema");
    for (const auto& [table, since] : kTables) {
        if (since > version) continue;
        s.reset();
        s.bind(std::string(table));
        if (!s.step()) refuse_schema(path, fmt::format("it has no table `{}`", table));
        if (s.text(0) != "table") refuse_schema(path, fmt::format("`{}` is a {}, not a table", table, s.text(0)));
        if (s.text(1).starts_with("CREATE VIRTUAL"))
            refuse_schema(path, fmt::format("`{}` is a virtual table, not a table", table));
    }
}

/// A read-only store's schema: the version this wanlab reads, with its tables as tables.
void check_schema(sqlite3* db, const fs::path& path) {
    int version = user_version(db, path);
    if (version > kSchemaVersion) refuse_newer(db, path, version);
    if (version < 1) refuse_schema(path, fmt::format("it has schema version {}", version));
    check_tables(db, path, version);
}

/// The file itself, before SQLite opens it: never through a symbolic link (SQLITE_OPEN_NOFOLLOW
/// refuses one too, but says only "unable to open database file"); a read-only store's must exist.
void check_file(const fs::path& path, Store::Access access) {
    std::error_code ec;
    auto st = fs::symlink_status(path, ec);
    if (st.type() == fs::file_type::not_found) {
        if (access == Store::Access::read_write) return;
        throw InputError(fmt::format("no results database {}", path.string()));
    }
    if (ec) throw Error(fmt::format("results database {}: {}", path.string(), ec.message()));
    if (fs::is_symlink(st))
        throw InputError(
            fmt::format("results database {} is a symbolic link; wanlab opens only the file itself", path.string()));
    if (!fs::is_regular_file(st))
        throw InputError(fmt::format("results database {} is not a regular file", path.string()));
}

/// Defences against a crafted file (https://sqlite.org/security.html): no functions with
/// side effects from its schema, no writes to it through its schema.
void harden(sqlite3* db, const fs::path& path) {
    if (sqlite3_db_config(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, nullptr) != SQLITE_OK ||
        sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr) != SQLITE_OK)
        fail(db, path, "configuring a read-only connection");
}

int past_deadline(void* deadline) {
    return std::chrono::steady_clock::now() > *static_cast<std::chrono::steady_clock::time_point*>(deadline) ? 1 : 0;
}

void configure(sqlite3* db, const fs::path& path) {
    if (sqlite3_busy_timeout(db, kBusyTimeoutMs) != SQLITE_OK) fail(db, path, "setting the busy timeout");
    // No WAL: the file may sit on a 9p share inside the micro-VM, where shared memory does not work.
    exec(db, path, "PRAGMA journal_mode = DELETE", "setting the journal mode");
    exec(db, path, "PRAGMA foreign_keys = ON", "enabling foreign keys");
}

std::vector<Trial> read_trials(sqlite3* db, const fs::path& path, const std::string& run_id) {
    // A read-only store of an older schema version lacks the later columns.
    Statement s(db, path,
                fmt::format("SELECT {} FROM trials WHERE run_id = ? ORDER BY idx",
                            record::column_list(record::trials(), user_version(db, path))),
                fmt::format("reading the trials of run `{}`", run_id));
    s.bind(run_id);
    std::vector<Trial> trials;
    while (s.step()) s.read(0, record::trials(), trials.emplace_back());
    return trials;
}

void read_metrics(Statement& s, std::int64_t measurement, Measurement& m) {
    s.reset();
    s.bind(measurement);
    while (s.step()) m.metrics[s.text(0)] = s.real(1);
}

void read_samples(Statement& s, std::int64_t measurement, Measurement& m) {
    s.reset();
    s.bind(measurement);
    while (s.step()) m.samples[s.text(0)].push_back(s.real(1));
}

void read_series(Statement& s, std::int64_t measurement, Measurement& m) {
    s.reset();
    s.bind(measurement);
    while (s.step()) m.series[s.text(0)].add(s.real(1), s.real(2));
}

std::vector<Measurement> read_measurements(sqlite3* db, const fs::path& path, const std::string& run_id) {
    const std::string action = fmt::format("reading the measurements of run `{}`", run_id);
    // A read-only store of schema version 1 has no counters column.
    Statement s(db, path,
                fmt::format("SELECT id, {} FROM measurements WHERE run_id = ? ORDER BY id",
                            record::column_list(record::measurements(), user_version(db, path))),
                action);
    Statement metrics(db, path, "SELECT name, value FROM metrics WHERE measurement_id = ?", action);
    Statement samples(db, path, "SELECT name, value FROM samples WHERE measurement_id = ? ORDER BY name, seq", action);
    // A read-only store of schema version 2 or older has no series.
    std::optional<Statement> series;
    if (user_version(db, path) >= 3)
        series.emplace(db, path, "SELECT name, t, value FROM series WHERE measurement_id = ? ORDER BY name, seq",
                       action);
    s.bind(run_id);
    std::vector<Measurement> out;
    while (s.step()) {
        s.read(1, record::measurements(), out.emplace_back());
        read_metrics(metrics, s.integer(0), out.back());
        read_samples(samples, s.integer(0), out.back());
        if (series) read_series(*series, s.integer(0), out.back());
    }
    return out;
}

void insert_metrics(sqlite3* db, const fs::path& path, std::int64_t measurement, const Measurement& m,
                    const std::string& action) {
    Statement s(db, path, "INSERT INTO metrics (measurement_id, name, value) VALUES (?, ?, ?)", action);
    for (const auto& [name, value] : m.metrics) {
        s.reset();
        s.bind(measurement, name, value).run();
    }
}

void insert_samples(sqlite3* db, const fs::path& path, std::int64_t measurement, const Measurement& m,
                    const std::string& action) {
    Statement s(db, path, "INSERT INTO samples (measurement_id, name, seq, value) VALUES (?, ?, ?, ?)", action);
    for (const auto& [name, values] : m.samples) {
        for (std::size_t seq = 0; seq < values.size(); ++seq) {
            s.reset();
            s.bind(measurement, name, seq, values[seq]).run();
        }
    }
}

void insert_series(sqlite3* db, const fs::path& path, std::int64_t measurement, const Measurement& m,
                   const std::string& action) {
    Statement s(db, path, "INSERT INTO series (measurement_id, name, seq, t, value) VALUES (?, ?, ?, ?, ?)", action);
    for (const auto& [name, series] : m.series) {
        for (std::size_t seq = 0; seq < series.size(); ++seq) {
            s.reset();
            s.bind(measurement, name, seq, series.t[seq], series.value[seq]).run();
        }
    }
}

/// Up to kCandidatesShown ids, newest first, then how many more there are.
std::string candidate_list(const std::vector<std::string>& ids) {
    std::string out;
    for (std::size_t i = 0; i < ids.size() && i < kCandidatesShown; ++i)
        out += fmt::format("{}{}", i > 0 ? ", " : "", ids[i]);
    if (ids.size() > kCandidatesShown) out += fmt::format(" (and {} more)", ids.size() - kCandidatesShown);
    return out;
}

/// Ids of the runs whose id starts with `prefix` (every run for "latest"), newest first.
std::vector<std::string> matching_ids(sqlite3* db, const fs::path& path, const std::string& prefix) {
    Statement s(
        db, path,
        fmt::format("SELECT id FROM runs WHERE ?1 = 'latest' OR substr(id, 1, length(?1)) = ?1{}", kNewestFirst),
        "looking up runs");
    s.bind(prefix);
    std::vector<std::string> ids;
    while (s.step()) ids.push_back(s.text(0));
    return ids;
}

[[noreturn]] void throw_no_match(sqlite3* db, const fs::path& path, const std::string& id) {
    std::vector<std::string> newest = matching_ids(db, path, "latest");
    std::string held = newest.empty() ? " (it holds no runs)" : "; newest runs: " + candidate_list(newest);
    throw InputError(
        fmt::format("no run `{}` in results database {}{}; see `wanlab results list`", id, path.string(), held));
}

/// The one run `id` names: itself, the only run it is a prefix of, or the newest for "latest".
std::string resolve_run(sqlite3* db, const fs::path& path, const std::string& id) {
    std::vector<std::string> ids = matching_ids(db, path, id);
    if (ids.empty()) throw_no_match(db, path, id);
    if (id == "latest" || ids.size() == 1) return ids.front();
    // An exact id wins over the longer ids it is a prefix of ("r1" and "r10").
    if (std::find(ids.begin(), ids.end(), id) != ids.end()) return id;
    throw InputError(
        fmt::format("run `{}` is ambiguous in results database {}: it matches {}; "
                    "see `wanlab results list`",
                    id, path.string(), candidate_list(ids)));
}

/// "VERB INTO table ([run_id, ]<its columns>) VALUES (?, ...)"; run_id (a trial's or a
/// measurement's run) is bound first.
template <typename Record>
std::string insert_sql(const char* verb, const record::Table<Record>& t, bool with_run_id) {
    std::string marks = with_run_id ? "?" : "";
    for (std::size_t i = 0; i < t.columns.size(); ++i) marks += marks.empty() ? "?" : ", ?";
    return fmt::format("{} INTO {} ({}{}) VALUES ({})", verb, t.name, with_run_id ? "run_id, " : "",
                       record::column_list(t), marks);
}

/// "UPDATE runs SET a = ?, b = ? WHERE id = ?".
std::string update_run_sql(std::span<const char* const> names) {
    std::string set;
    for (const char* name : names) set += fmt::format("{}{} = ?", set.empty() ? "" : ", ", name);
    return fmt::format("UPDATE runs SET {} WHERE id = ?", set);
}

Statement& bind_trial(Statement& s, const std::string& run_id, const Trial& t) {
    return s.bind(run_id).bind_record(2, record::trials(), t);
}

}  // namespace

Store::Store(const fs::path& db, Access access, std::chrono::milliseconds read_limit)
    : path_(db), access_(access), read_limit_(read_limit) {
    check_file(path_, access_);
    const bool read_only = access_ == Access::read_only;
    const int flags =
        SQLITE_OPEN_NOFOLLOW | (read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    int rc = sqlite3_open_v2(path_.c_str(), &db_, flags, nullptr);
    try {
        if (rc != SQLITE_OK) fail(db_, path_, "opening");
        if (read_only) {
            harden(db_, path_);
            if (sqlite3_busy_timeout(db_, kBusyTimeoutMs) != SQLITE_OK) fail(db_, path_, "setting the busy timeout");
            // Every kProgressSteps virtual-machine instructions SQLite asks whether to stop.
            constexpr int kProgressSteps = 1000;
            sqlite3_progress_handler(db_, kProgressSteps, &past_deadline, &deadline_);
            start_read();
            check_schema(db_, path_);
        } else {
            configure(db_, path_);
            ensure_schema(db_, path_);
            check_tables(db_, path_, kSchemaVersion);
        }
    } catch (...) {
        sqlite3_close(db_);
        throw;
    }
}

Store::~Store() { sqlite3_close(db_); }

void Store::start_read() { deadline_ = std::chrono::steady_clock::now() + read_limit_; }

void Store::begin_run(const Run& run, const std::vector<Trial>& trials) {
    const std::string action = fmt::format("recording run `{}`", run.id);
    // The run and its planned trials in one transaction: one commit (a few fsyncs) instead of
    // one per trial, which cost seconds before the first trial of a 1,000-trial run.
    Transaction tx(db_, path_, "BEGIN IMMEDIATE", action);
    Statement(db_, path_, insert_sql("INSERT", record::runs(), false), action)
        .bind_record(1, record::runs(), run)
        .run();
    if (!trials.empty()) {
        Statement s(db_, path_, insert_sql("INSERT OR REPLACE", record::trials(), true), action);
        for (const auto& t : trials) {
            s.reset();
            bind_trial(s, run.id, t).run();
        }
    }
    tx.commit();
}

void Store::put_trial(const std::string& run_id, const Trial& t) {
    const std::string action = fmt::format("recording trial {} of run `{}`", t.index, run_id);
    Transaction tx(db_, path_, "BEGIN IMMEDIATE", action);
    Statement s(db_, path_, insert_sql("INSERT OR REPLACE", record::trials(), true), action);
    bind_trial(s, run_id, t).run();
    tx.commit();
}

void Store::add_measurement(const std::string& run_id, const Measurement& m) {
    const std::string action =
        fmt::format("recording probe `{}` repeat {} of trial {} of run `{}`", m.probe, m.repeat, m.trial, run_id);
    Transaction tx(db_, path_, "BEGIN IMMEDIATE", action);
    Statement(db_, path_, insert_sql("INSERT", record::measurements(), true), action)
        .bind(run_id)
        .bind_record(2, record::measurements(), m)
        .run();
    const std::int64_t id = sqlite3_last_insert_rowid(db_);
    insert_metrics(db_, path_, id, m, action);
    insert_samples(db_, path_, id, m, action);
    insert_series(db_, path_, id, m, action);
    tx.commit();
}

void Store::finish_run(const Run& run) {
    const std::string action = fmt::format("finishing run `{}`", run.id);
    Transaction tx(db_, path_, "BEGIN IMMEDIATE", action);
    static constexpr const char* kFinished[] = {"status", "finished", "error", "sessions"};
    Statement(db_, path_, update_run_sql(kFinished), action)
        .bind_columns(1, record::runs(), kFinished, run)
        .bind_columns(5, record::runs(), std::array{"id"}, run)
        .run();
    if (sqlite3_changes(db_) == 0)
        throw Error(fmt::format("results database {}: {}: no such run", path_.string(), action));
    tx.commit();
}

void Store::resume_run(const Run& run, const std::vector<Trial>& trials) {
    const std::string action = fmt::format("resuming run `{}`", run.id);
    Transaction tx(db_, path_, "BEGIN IMMEDIATE", action);
    static constexpr const char* kResumed[] = {"status", "finished", "error", "sessions", "planned_trials"};
    Statement(db_, path_, update_run_sql(kResumed), action)
        .bind_columns(1, record::runs(), kResumed, run)
        .bind_columns(6, record::runs(), std::array{"id"}, run)
        .run();
    if (sqlite3_changes(db_) == 0)
        throw Error(fmt::format("results database {}: {}: no such run", path_.string(), action));
    // A trial measured again starts from nothing: what a cut-off session kept of it goes (its
    // metrics, samples and series with it, ON DELETE CASCADE).
    Statement drop(db_, path_, "DELETE FROM measurements WHERE run_id = ? AND trial = ?", action);
    Statement put(db_, path_, insert_sql("INSERT OR REPLACE", record::trials(), true), action);
    for (const auto& t : trials) {
        if (t.status == TrialStatus::done) continue;
        drop.reset();
        drop.bind(run.id, t.index).run();
        put.reset();
        bind_trial(put, run.id, t).run();
    }
    tx.commit();
}

std::string this_boot() {
    std::ifstream in("/proc/sys/kernel/random/boot_id");
    std::string id;
    std::getline(in, id);
    return id;
}

bool abandoned(const Run& run) {
    if (run.status != RunStatus::running || run.sessions.empty()) return false;
    const auto& last = run.sessions.back();
    if (last.pid <= 0 || last.boot.empty() || last.boot != this_boot()) return false;  // cannot tell from here
    return !sys::process_running(static_cast<pid_t>(last.pid), last.start_time);
}

void close_if_abandoned(Run& run) {
    if (!abandoned(run)) return;
    const std::string why = fmt::format(
        "its process (pid {}) ended without closing the record: killed (kill -9, the OOM killer) or crashed",
        run.sessions.back().pid);
    run.status = RunStatus::killed;
    run.error = why;
    run.sessions.back().status = RunStatus::killed;
    run.sessions.back().error = why;
}

std::vector<Run> Store::list_runs() {
    start_read();
    Transaction tx(db_, path_, "BEGIN", "listing runs");
    Statement s(db_, path_,
                fmt::format("SELECT {} FROM runs{}", record::column_list(record::runs(), user_version(db_, path_)),
                            kNewestFirst),
                "listing runs");
    std::vector<Run> runs;
    while (s.step()) s.read(0, record::runs(), runs.emplace_back());
    tx.commit();
    for (auto& r : runs) close_if_abandoned(r);
    return runs;
}

RunData Store::load_run(const std::string& id) {
    start_read();
    const std::string action = fmt::format("reading run `{}`", id);
    Transaction tx(db_, path_, "BEGIN", action);
    Statement s(
        db_, path_,
        fmt::format("SELECT {} FROM runs WHERE id = ?", record::column_list(record::runs(), user_version(db_, path_))),
        action);
    s.bind(resolve_run(db_, path_, id));
    if (!s.step()) fail(db_, path_, action);
    RunData data;
    s.read(0, record::runs(), data.run);
    close_if_abandoned(data.run);
    data.trials = read_trials(db_, path_, data.run.id);
    data.measurements = read_measurements(db_, path_, data.run.id);
    tx.commit();
    return data;
}

}  // namespace wanlab::results
