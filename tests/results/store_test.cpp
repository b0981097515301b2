// The results store on real SQLite files in a temporary directory.
#include <catch2/catch.hpp>

#include <fmt/format.h>
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iterator>

#include <unistd.h>

#include "core/error.h"
#include "core/proc.h"
#include "results/records.h"
#include "results/store.h"
#include "tests/results/sample_run.h"

using namespace wanlab::results;
using wanlab::results::samples::require_same;
using wanlab::results::samples::sample_measurement;
using wanlab::results::samples::sample_run;
using wanlab::results::samples::sample_run_header;
using wanlab::results::samples::TempDir;

namespace {

void store_whole(Store& store, const RunData& d) {
    Run started = d.run;
    started.status = RunStatus::running;
    started.finished.clear();
    store.begin_run(started);
    for (const auto& t : d.trials) store.put_trial(d.run.id, t);
    for (const auto& m : d.measurements) store.add_measurement(d.run.id, m);
    store.finish_run(d.run);
}

/// Runs raw SQL on the file, as a user's `sqlite3` would.
void sql(const std::filesystem::path& db, const std::string& statements) {
    sqlite3* h = nullptr;
    REQUIRE(sqlite3_open(db.c_str(), &h) == SQLITE_OK);
    int rc = sqlite3_exec(h, statements.c_str(), nullptr, nullptr, nullptr);
    INFO(sqlite3_errmsg(h));
    sqlite3_close(h);
    REQUIRE(rc == SQLITE_OK);
}

/// The first column of the first row of a query, as text.
std::string query(const std::filesystem::path& db, const std::string& select) {
    sqlite3* h = nullptr;
    REQUIRE(sqlite3_open(db.c_str(), &h) == SQLITE_OK);
    sqlite3_stmt* s = nullptr;
    std::string out;
    if (sqlite3_prepare_v2(h, select.c_str(), -1, &s, nullptr) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW &&
        sqlite3_column_text(s, 0) != nullptr)
        out = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    sqlite3_close(h);
    return out;
}

std::string message_of(Store& store, const std::string& id) {
    try {
        store.load_run(id);
    } catch (const wanlab::InputError& e) {
        return e.what();
    }
    return "no error";
}

}  // namespace

TEST_CASE("a complete run round-trips through the results database field by field", "[results]") {
    TempDir dir;
    RunData d = sample_run();
    {
        Store store(dir.path / "results.db");
        store_whole(store, d);
    }
    Store store(dir.path / "results.db");
    require_same(store.load_run(d.run.id), d);
}

TEST_CASE("the results database can be queried with plain sql, one row per metric and NaN as null", "[results]") {
    TempDir dir;
    const auto db = dir.path / "results.db";
    {
        Store store(db);
        store_whole(store, sample_run());
    }
    CHECK(query(db, "PRAGMA user_version") == "6");
    CHECK(query(db, "PRAGMA journal_mode") == "delete");
    CHECK(query(db, "SELECT count(*) FROM series WHERE name = 'stream1.cwnd'") == "9");
    CHECK(query(db, "SELECT count(*) FROM series WHERE name = 'stream1.cwnd' AND value IS NULL") == "3");
    CHECK(query(db, "SELECT t FROM series WHERE name = 'throughput' AND seq = 1 LIMIT 1") == "2.0");
    CHECK(query(db, "SELECT json_extract(captures, '$[0].packets') FROM trials WHERE idx = 1") == "1200");
    CHECK(query(db, "SELECT count(*) FROM metrics") == "9");
    CHECK(query(db, "SELECT count(*) FROM metrics WHERE value IS NULL AND name = 'rtt'") == "3");
    CHECK(query(db, "SELECT value FROM metrics WHERE name = 'retransmits' LIMIT 1") == "12.0");
    CHECK(query(db,
                "SELECT group_concat(value, ' ') FROM (SELECT value FROM samples WHERE name = 'cwnd' "
                "AND measurement_id = 1 ORDER BY seq)") == "10.0 20.0 40.0");
    CHECK(query(db, "SELECT count(*) FROM metric_values WHERE variant = 'big, \"buffers\"'") == "3");
    CHECK(query(db, "SELECT json_extract(env, '$.where') FROM runs") == "vm (tcg, 2 cpus)");
}

TEST_CASE("an interrupted run keeps the measurements committed before it stopped", "[results]") {
    TempDir dir;
    RunData d = sample_run();
    Store store(dir.path / "results.db");
    store.begin_run(sample_run_header());  // status "running", not finished
    store.put_trial(d.run.id, d.trials[0]);
    store.add_measurement(d.run.id, d.measurements[0]);

    RunData partial = Store(dir.path / "results.db").load_run(d.run.id);
    CHECK(partial.run.status == RunStatus::running);
    CHECK(partial.run.finished.empty());
    CHECK(partial.measurements.size() == 1);

    Run stopped = d.run;
    stopped.status = RunStatus::interrupted;
    stopped.finished = "2026-11-30T04:12:30Z";
    stopped.error = "interrupted by SIGINT";
    store.finish_run(stopped);
    RunData after = store.load_run(d.run.id);
    CHECK(after.run.status == RunStatus::interrupted);
    CHECK(after.run.finished == "2026-11-30T04:12:30Z");
    CHECK(after.run.error == "interrupted by SIGINT");
    REQUIRE(after.trials.size() == 1);
    REQUIRE(after.measurements.size() == 1);
    require_same(after.measurements[0], d.measurements[0]);
}

TEST_CASE("a run whose process died without closing its record reads as killed, a live one as running", "[results]") {
    TempDir dir;
    Store store(dir.path / "results.db");
    auto header = [](const std::string& id, std::int64_t pid, unsigned long long start, const std::string& boot) {
        Run r = sample_run_header();
        r.id = id;
        Session s;
        s.started = r.started;
        s.pid = pid;
        s.start_time = start;
        s.boot = boot;
        r.sessions = {s};
        return r;
    };
    const auto me = ::getpid();
    const auto started = wanlab::sys::process_start_time(me);
    REQUIRE(started > 0);
    REQUIRE_FALSE(this_boot().empty());
    store.begin_run(header("live", me, started, this_boot()));            // this very process
    store.begin_run(header("dead", me, started + 1, this_boot()));        // the pid is someone else's now
    store.begin_run(header("elsewhere", me, started + 1, "other-boot"));  // another kernel (the micro-VM)
    store.begin_run(header("unrecorded", 0, 0, ""));                      // written before wanlab kept it
    auto dead = store.load_run("dead").run;
    CHECK(dead.status == RunStatus::killed);
    CHECK_THAT(dead.error,
               Catch::Contains("ended without closing the record: killed (kill -9, the OOM killer) or crashed"));
    CHECK(dead.sessions.back().status == RunStatus::killed);
    CHECK(store.load_run("live").run.status == RunStatus::running);
    CHECK(store.load_run("elsewhere").run.status == RunStatus::running);
    CHECK(store.load_run("unrecorded").run.status == RunStatus::running);
    for (const auto& r : store.list_runs()) CHECK((r.id == "dead") == (r.status == RunStatus::killed));
}

TEST_CASE("putting a trial again replaces it", "[results]") {
    TempDir dir;
    RunData d = sample_run();
    Store store(dir.path / "results.db");
    store.begin_run(d.run);
    Trial planned = d.trials[0];
    planned.status = TrialStatus::pending;
    planned.check = {};
    store.put_trial(d.run.id, planned);
    store.put_trial(d.run.id, d.trials[0]);

    RunData loaded = store.load_run(d.run.id);
    REQUIRE(loaded.trials.size() == 1);
    require_same(loaded.trials[0], d.trials[0]);
}

TEST_CASE("writes for a run that was never begun or a duplicate run id are refused", "[results]") {
    TempDir dir;
    Store store(dir.path / "results.db");
    store.begin_run(sample_run_header("r1"));
    CHECK_THROWS_WITH(store.begin_run(sample_run_header("r1")),
                      Catch::Contains("recording run `r1`") && Catch::Contains("UNIQUE constraint failed"));
    CHECK_THROWS_WITH(store.add_measurement("r2", samples::sample_measurement(1, 1)),
                      Catch::Contains("results database " + (dir.path / "results.db").string()) &&
                          Catch::Contains("FOREIGN KEY constraint failed"));
    CHECK_THROWS_WITH(store.finish_run(sample_run_header("r2")), Catch::EndsWith("finishing run `r2`: no such run"));
}

TEST_CASE("runs are listed newest first without their trials or measurements", "[results]") {
    TempDir dir;
    Store store(dir.path / "results.db");
    store.begin_run(sample_run_header("b", "2026-11-30T05:00:00Z"));
    store.begin_run(sample_run_header("c", "2026-11-30T04:00:00Z"));
    store.begin_run(sample_run_header("a", "2026-11-30T05:00:00Z"));  // same second, added later
    std::vector<Run> runs = store.list_runs();
    REQUIRE(runs.size() == 3);
    CHECK(runs[0].id == "a");
    CHECK(runs[1].id == "b");
    CHECK(runs[2].id == "c");
    CHECK(runs[0].env.where == "vm (tcg, 2 cpus)");
}

TEST_CASE("a run is found by its id, a unique prefix of it, or latest", "[results]") {
    TempDir dir;
    Store store(dir.path / "results.db");
    store.begin_run(sample_run_header("20261130-041209-bulk", "2026-11-30T04:12:09Z"));
    store.begin_run(sample_run_header("20261130-051500-bulk", "2026-11-30T05:15:00Z"));
    store.begin_run(sample_run_header("r1", "2026-11-29T00:00:00Z"));
    store.begin_run(sample_run_header("r10", "2026-11-28T00:00:00Z"));

    CHECK(store.load_run("20261130-041209-bulk").run.id == "20261130-041209-bulk");
    CHECK(store.load_run("20261130-05").run.id == "20261130-051500-bulk");
    CHECK(store.load_run("latest").run.id == "20261130-051500-bulk");
    CHECK(store.load_run("r1").run.id == "r1");  // exact beats the longer r10
    CHECK(store.load_run("r10").run.id == "r10");
}

TEST_CASE("an ambiguous prefix lists the runs it matches, newest first", "[results]") {
    TempDir dir;
    const auto db = dir.path / "results.db";
    Store store(db);
    for (int i = 1; i <= 7; ++i)
        store.begin_run(sample_run_header("run-" + std::to_string(i), "2026-11-30T04:00:0" + std::to_string(i) + "Z"));
    CHECK(message_of(store, "run-") == "run `run-` is ambiguous in results database " + db.string() +
                                           ": it matches run-7, run-6, run-5, run-4, run-3 (and 2 more); "
                                           "see `wanlab results list`");
}

TEST_CASE("a missing run names the newest runs, or says the database holds none", "[results]") {
    TempDir dir;
    const auto db = dir.path / "results.db";
    Store store(db);
    CHECK(message_of(store, "latest") ==
          "no run `latest` in results database " + db.string() + " (it holds no runs); see `wanlab results list`");
    store.begin_run(sample_run_header("a", "2026-11-30T04:00:00Z"));
    store.begin_run(sample_run_header("b", "2026-11-30T05:00:00Z"));
    CHECK(message_of(store, "zzz") ==
          "no run `zzz` in results database " + db.string() + "; newest runs: b, a; see `wanlab results list`");
    CHECK_THROWS_AS(store.load_run("zzz"), wanlab::InputError);
}

TEST_CASE("a database written by a newer wanlab is refused with the version to use", "[results]") {
    TempDir dir;
    const auto db = dir.path / "results.db";
    { Store store(db); }
    sql(db, "PRAGMA user_version = 7; UPDATE meta SET value = '0.4.0' WHERE key = 'written_by';");
    CHECK_THROWS_WITH(Store(db), Catch::StartsWith("results database " + db.string() +
                                                   " has schema version 7 (written by wanlab 0.4.0); wanlab ") &&
                                     Catch::EndsWith(" reads up to version 6: open it with wanlab 0.4.0 or newer"));

    const auto bare = dir.path / "bare.db";
    sql(bare, "PRAGMA user_version = 8;");
    CHECK_THROWS_WITH(Store(bare), Catch::EndsWith("open it with a newer wanlab"));
}

TEST_CASE("a file that is not a database is refused with its path", "[results]") {
    TempDir dir;
    const auto db = dir.path / "results.db";
    {
        std::FILE* f = std::fopen(db.c_str(), "w");
        std::fputs("not sqlite, just text long enough to fill a header of one hundred bytes .................\n", f);
        std::fclose(f);
    }
    CHECK_THROWS_WITH(Store(db), Catch::StartsWith("results database " + db.string() + ": ") &&
                                     Catch::Contains("file is not a database"));
    CHECK_THROWS_WITH(Store(dir.path / "missing" / "results.db"), Catch::Contains("unable to open database file"));
}

TEST_CASE("a second store on the same file sees what the first committed", "[results]") {
    TempDir dir;
    RunData d = sample_run();
    Store first(dir.path / "results.db");
    Store second(dir.path / "results.db");
    first.begin_run(d.run);
    REQUIRE(second.list_runs().size() == 1);
    second.put_trial(d.run.id, d.trials[0]);
    second.add_measurement(d.run.id, d.measurements[0]);
    RunData seen = first.load_run("latest");
    CHECK(seen.trials.size() == 1);
    CHECK(seen.measurements.size() == 1);
}

namespace {

std::string bytes_of(const std::filesystem::path& file) {
    std::ifstream in(file, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

/// A database wanlab wrote, holding sample_run().
std::filesystem::path written_db(const TempDir& dir) {
    const auto db = dir.path / "results.db";
    Store store(db);
    store_whole(store, sample_run());
    return db;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

TEST_CASE("a read-only store reads what a run wrote and leaves the file byte-identical", "[results]") {
    TempDir dir;
    const auto db = written_db(dir);
    const std::string before = bytes_of(db);
    Store store(db, Store::Access::read_only);
    REQUIRE(store.list_runs().size() == 1);
    require_same(store.load_run("latest"), sample_run());
    CHECK(bytes_of(db) == before);
}

TEST_CASE("a symbolic link in place of the database is refused and its target left byte-identical", "[results]") {
    TempDir dir;
    const auto text = dir.path / "notes.txt", empty = dir.path / "empty", link = dir.path / "results.db";
    std::ofstream(text) << "a user's file, not a database\n";
    std::ofstream{empty};
    for (const auto& target : {text, empty}) {
        std::filesystem::remove(link);
        std::filesystem::create_symlink(target, link);
        const std::string before = bytes_of(target);
        const std::string refused =
            "results database " + link.string() + " is a symbolic link; wanlab opens only the file itself";
        CHECK_THROWS_WITH(Store(link, Store::Access::read_only), refused);
        CHECK_THROWS_WITH(Store(link), refused);  // `wanlab run` does not write through one either
        CHECK(bytes_of(target) == before);
    }
}

TEST_CASE("a read-only store refuses a file that is not a wanlab database and leaves it unchanged", "[results]") {
    TempDir dir;
    const auto text = dir.path / "text.db", empty = dir.path / "empty.db";
    std::ofstream(text) << "not sqlite, just text long enough to fill a header of one hundred bytes ...............\n";
    std::ofstream{empty};
    const std::string before = bytes_of(text);
    CHECK_THROWS_WITH(Store(text, Store::Access::read_only), Catch::Contains("file is not a database"));
    CHECK(bytes_of(text) == before);
    CHECK_THROWS_WITH(
        Store(empty, Store::Access::read_only),
        "results database " + empty.string() + ": it has schema version 0: is it a wanlab results database?");
    CHECK(std::filesystem::file_size(empty) == 0);
}

TEST_CASE("a read-only store refuses a missing database and does not create it", "[results]") {
    TempDir dir;
    const auto db = dir.path / "results.db";
    CHECK_THROWS_AS(Store(db, Store::Access::read_only), wanlab::InputError);
    CHECK_THROWS_WITH(Store(db, Store::Access::read_only), "no results database " + db.string());
    CHECK_FALSE(std::filesystem::exists(std::filesystem::symlink_status(db)));
}

TEST_CASE("a recursive view in place of the runs table is refused at once, not read", "[results]") {
    TempDir dir;
    const auto db = written_db(dir);
    // Selecting from this view never ends: the counter has no limit.
    sql(db,
        "DROP TABLE runs; CREATE VIEW runs AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
        "SELECT x AS id, '' AS experiment, '' AS file, '' AS text, '[]' AS sets, '' AS baseline, '' AS started, "
        "'' AS finished, '' AS status, '' AS error, 0 AS planned_trials, '{}' AS env FROM c;");
    const auto start = std::chrono::steady_clock::now();
    CHECK_THROWS_WITH(
        Store(db, Store::Access::read_only).list_runs(),
        "results database " + db.string() + ": `runs` is a view, not a table: is it a wanlab results database?");
    CHECK(seconds_since(start) < 1);
}

TEST_CASE("a table replaced by a view or a virtual table is refused", "[results]") {
    TempDir dir;
    const auto db = written_db(dir);
    sql(db, "DROP TABLE samples; CREATE VIEW samples AS SELECT measurement_id, name, 0 AS seq, value FROM metrics;");
    CHECK_THROWS_WITH(
        Store(db, Store::Access::read_only),
        "results database " + db.string() + ": `samples` is a view, not a table: is it a wanlab results database?");
    CHECK_THROWS_WITH(Store(db), Catch::Contains("`samples` is a view, not a table"));
    sql(db, "DROP VIEW samples; CREATE VIRTUAL TABLE samples USING fts5(measurement_id, name, seq, value);");
    CHECK_THROWS_WITH(Store(db, Store::Access::read_only),
                      Catch::Contains("`samples` is a virtual table, not a table"));
    sql(db, "DROP TABLE samples;");
    CHECK_THROWS_WITH(Store(db, Store::Access::read_only), Catch::Contains(": it has no table `samples`: "));
}

TEST_CASE("a read that takes longer than the read-only limit stops with a clear error", "[results]") {
    TempDir dir;
    const auto db = dir.path / "results.db";
    {
        Store store(db);
        store.begin_run(sample_run_header("big"));
        Measurement m = sample_measurement(1, 1);
        m.samples["throughput"].assign(100000, 1.0);  // reading these takes tens of milliseconds
        store.add_measurement("big", m);
    }
    REQUIRE(Store(db, Store::Access::read_only).load_run("big").measurements.size() == 1);
    const auto start = std::chrono::steady_clock::now();
    CHECK_THROWS_WITH(Store(db, Store::Access::read_only, std::chrono::milliseconds(1)).load_run("big"),
                      Catch::StartsWith("results database " + db.string() + ": ") &&
                          Catch::EndsWith(": the database took too long: is it a wanlab results database?"));
    CHECK(seconds_since(start) < 1);
}

TEST_CASE("a version 1 database reads with empty counters, series and captures and is migrated when opened for writing",
          "[results]") {
    TempDir dir;
    const auto db = dir.path / "results.db";
    auto d = sample_run();
    d.measurements.front().counters = {{"client", {{"TcpExt.DelayedACKs", 41}}}, {"cpu_busiest", 0.5}};
    {
        Store store(db);
        store_whole(store, d);
        CHECK(store.load_run(d.run.id).measurements.front().counters == d.measurements.front().counters);
    }
    // Make it what wanlab 0.1 wrote: no counters, captures, link_loss_down or series; version 1.
    sql(db,
        "ALTER TABLE measurements DROP COLUMN counters; ALTER TABLE trials DROP COLUMN captures; "
        "ALTER TABLE trials DROP COLUMN link_loss_down; DROP TABLE series; ALTER TABLE runs DROP COLUMN shard; "
        "ALTER TABLE trials DROP COLUMN origin; ALTER TABLE trials DROP COLUMN session; "
        "ALTER TABLE runs DROP COLUMN sessions; ALTER TABLE runs DROP COLUMN repeats; PRAGMA user_version = 1;");
    {
        Store old(db, Store::Access::read_only);
        auto loaded = old.load_run(d.run.id);
        CHECK(loaded.measurements.front().counters == nlohmann::json::object());
        CHECK(loaded.measurements.front().series.empty());
        CHECK(loaded.trials.front().captures.empty());
        CHECK(std::isnan(loaded.trials.front().link_loss_down));
        CHECK(loaded.measurements.size() == d.measurements.size());
        CHECK(loaded.run.shard.empty());
    }
    CHECK(query(db, "PRAGMA user_version") == "1");  // reading changed nothing
    {
        Store store(db);
        auto loaded = store.load_run(d.run.id);
        CHECK(loaded.measurements.front().counters == nlohmann::json::object());
        CHECK(loaded.measurements.front().series.empty());
        store.add_measurement(d.run.id, d.measurements.front());  // a migrated store takes series
        CHECK(store.load_run(d.run.id).measurements.back().series.size() == 2);
    }
    CHECK(query(db, "PRAGMA user_version") == "6");
    CHECK(query(db, "SELECT count(*) FROM measurements WHERE counters = '{}'") ==
          std::to_string(d.measurements.size()));
}

TEST_CASE("a version 2 database gains series and captures when opened for writing", "[results]") {
    TempDir dir;
    const auto db = dir.path / "results.db";
    auto d = sample_run();
    {
        Store store(db);
        store_whole(store, d);
    }
    sql(db,
        "ALTER TABLE trials DROP COLUMN captures; ALTER TABLE trials DROP COLUMN link_loss_down; DROP TABLE series; "
        "ALTER TABLE runs DROP COLUMN shard; ALTER TABLE trials DROP COLUMN origin; ALTER TABLE trials DROP COLUMN "
        "session; "
        "ALTER TABLE runs DROP COLUMN sessions; ALTER TABLE runs DROP COLUMN repeats; PRAGMA user_version = 2;");
    CHECK(Store(db, Store::Access::read_only).load_run(d.run.id).trials.front().captures.empty());
    {
        Store store(db);
        store.put_trial(d.run.id, d.trials.front());
        CHECK(store.load_run(d.run.id).trials.front().captures.size() == 1);
    }
    CHECK(query(db, "PRAGMA user_version") == "6");
}

TEST_CASE(
    "a run records its shard, sessions, repeat rule and each trial's origin and session, and a version 3 database "
    "gains them",
    "[results]") {
    TempDir dir;
    const auto db = dir.path / "results.db";
    auto d = sample_run();
    d.run.shard = "2/4";
    d.trials[1].origin = "run r1 (shard 1/2) of /tmp/a, \"b\" on lab-1, kernel 6.1.0";
    d.run.sessions = {{"2026-11-30T04:12:09Z", "2026-11-30T04:12:30Z", RunStatus::interrupted, "killed", "lab-1",
                       "6.1.0", "host", "", 0, 0, ""},
                      {"2026-11-30T05:00:00Z", "2026-11-30T05:01:00Z", RunStatus::complete, "", "lab-1", "6.1.0",
                       "host", "kernel 6.1.0-27 -> 6.1.0, forced", 0, 0, ""}};
    d.trials[0].session = 1;
    d.trials[1].session = 2;
    {
        Store store(db);
        store_whole(store, d);
        CHECK(store.load_run(d.run.id).run.shard == "2/4");
        CHECK(store.list_runs().front().shard == "2/4");
        CHECK(store.load_run(d.run.id).trials[1].origin == d.trials[1].origin);
        CHECK(store.load_run(d.run.id).trials[0].origin.empty());
        auto back = store.load_run(d.run.id);
        REQUIRE(back.run.sessions.size() == 2);
        CHECK(back.run.sessions[1].note == "kernel 6.1.0-27 -> 6.1.0, forced");
        CHECK(back.run.sessions[0].error == "killed");
        CHECK(back.trials[0].session == 1);
        CHECK(back.trials[1].session == 2);
    }
    sql(db,
        "ALTER TABLE runs DROP COLUMN shard; ALTER TABLE trials DROP COLUMN origin; ALTER TABLE trials DROP COLUMN "
        "session; "
        "ALTER TABLE runs DROP COLUMN sessions; ALTER TABLE runs DROP COLUMN repeats; PRAGMA user_version = 3;");
    CHECK(Store(db, Store::Access::read_only).load_run(d.run.id).run.shard.empty());
    CHECK(Store(db, Store::Access::read_only).load_run(d.run.id).trials[1].origin.empty());
    CHECK(Store(db, Store::Access::read_only).load_run(d.run.id).trials[1].session == 0);
    CHECK(Store(db, Store::Access::read_only).load_run(d.run.id).run.sessions.empty());
    auto e = sample_run();
    e.run.id = "second";
    e.run.shard = "1/2";
    e.run.repeats = {true, 3, 10, 0.05};
    e.trials[0].origin = "run r2 of /tmp/c on lab-2, kernel 6.1.0";
    CHECK_FALSE(Store(db, Store::Access::read_only).load_run(d.run.id).run.repeats.adaptive);
    {
        Store store(db);
        store_whole(store, e);
        CHECK(store.load_run("second").run.shard == "1/2");
        const auto rule = store.load_run("second").run.repeats;  // the adaptive rule, since version 6
        CHECK(rule.adaptive);
        CHECK(rule.first == 3u);
        CHECK(rule.max == 10u);
        CHECK(rule.precision == Approx(0.05));
        CHECK_FALSE(store.load_run(d.run.id).run.repeats.adaptive);
        CHECK(store.load_run("second").trials[0].origin == e.trials[0].origin);
        CHECK(store.load_run(d.run.id).run.shard.empty());
    }
    CHECK(query(db, "PRAGMA user_version") == "6");
}

TEST_CASE("a new store's runs, trials and measurements tables are schema version 6's, byte for byte", "[results]") {
    // As kSchema spelled them before the records' descriptions wrote them (issue 38 item 3):
    // sqlite_master keeps this text, and older wanlabs read the same columns.
    const std::pair<const char*, const char*> tables[] = {
        {"runs", R"sql(CREATE TABLE runs (
    id TEXT PRIMARY KEY,
    experiment TEXT NOT NULL,
    file TEXT NOT NULL,
    text TEXT NOT NULL,
    sets TEXT NOT NULL,            -- JSON array of the --set arguments, in order
    baseline TEXT NOT NULL,
    started TEXT NOT NULL,         -- ISO 8601 UTC
    finished TEXT NOT NULL,        -- '' while running
    status TEXT NOT NULL,          -- running, complete, interrupted, failed
    error TEXT NOT NULL,
    planned_trials INTEGER NOT NULL,
    env TEXT NOT NULL,             -- JSON: hostname kernel machine wanlab_version where sysctls_before
    shard TEXT NOT NULL DEFAULT '', -- since version 4: K/N of a run of --shard K/N; empty: every trial
    -- JSON array: started finished status error hostname kernel where note; since version 5
    sessions TEXT NOT NULL DEFAULT '[]',
    -- JSON: {} for a fixed count, else rule first max precision ([run] repeats = "auto"); since version 6
    repeats TEXT NOT NULL DEFAULT '{}'
))sql"},
        {"trials", R"sql(CREATE TABLE trials (
    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    idx INTEGER NOT NULL,          -- 1-based position in the plan
    id TEXT NOT NULL,
    variant TEXT NOT NULL,
    sweep TEXT NOT NULL,           -- JSON [[path, value], ...] in plan order
    link_rtt REAL,                 -- seconds, both directions; NULL: none
    link_rate REAL,                -- bit/s, slowest direction; NULL: none
    link_loss REAL,                -- random loss fraction, client to server; NULL: another model
    link_loss_down REAL,           -- the same, server to client; since version 3
    sysctls TEXT NOT NULL,         -- JSON {"host:key": value}
    emulation_check TEXT NOT NULL, -- JSON: checked, held, rtt_/rate_configured/measured, note
    status TEXT NOT NULL,          -- pending, done, interrupted, failed
    error TEXT NOT NULL,
    -- JSON array: probe, host, dev, path, packets, bytes, dropped, stopped; since version 3
    captures TEXT NOT NULL DEFAULT '[]',
    origin TEXT NOT NULL DEFAULT '', -- since version 5: the run it was measured in (results merge); '' = this one
    session INTEGER NOT NULL DEFAULT 0, -- since version 5: runs.sessions' 1-based index; 0 = not recorded
    PRIMARY KEY (run_id, idx)
))sql"},
        {"measurements", R"sql(CREATE TABLE measurements (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    trial INTEGER NOT NULL,        -- trials.idx
    probe TEXT NOT NULL,
    kind TEXT NOT NULL,
    tool TEXT NOT NULL,
    repeat INTEGER NOT NULL,       -- 1-based
    started TEXT NOT NULL,
    notes TEXT NOT NULL,           -- JSON array of text
    -- JSON array, per connection as the probe reported it
    connections TEXT NOT NULL,
    -- JSON: kernel counter deltas per lab host and cpu_busiest; since version 2
    counters TEXT NOT NULL DEFAULT '{}'
))sql"},
    };
    TempDir dir;
    auto db = dir.path / "results.db";
    { Store store(db); }
    for (const auto& [name, create] : tables)
        CHECK(query(db, fmt::format("SELECT sql FROM sqlite_master WHERE name = '{}'", name)) == create);
}

namespace {

// The sample run with every column of every record set to something other than its default.
RunData every_column_set() {
    auto d = sample_run();
    d.run.error = "a trial failed";
    d.run.shard = "1/2";
    d.run.sessions = {{"2026-11-30T04:12:09Z", "2026-11-30T04:13:00Z", RunStatus::complete, "", "lab-1", "6.1.0",
                       "host", "", 4242, 123456, "6f1c0d2e-boot"}};
    d.run.repeats = {true, 3, 9, 0.05};
    d.trials[0].link_loss = 0.01;
    d.trials[1].error = "iperf3 exited with status 1";
    d.trials[1].origin = "run 3f2a (shard 1/2) of wanlab-results-1 on host, kernel 6.1.0";
    d.trials[1].session = 1;
    d.measurements[0].counters = {{"client", {{"TcpExt.DelayedACKs", 412}}}, {"cpu_busiest", 0.41}};
    return d;
}

// Each column of `table` holds the same value in `a` and `b` (NaN as null).
template <typename Record>
void require_same_columns(const record::Table<Record>& table, const Record& a, const Record& b) {
    for (const auto& c : table.columns) {
        INFO(table.name << "." << c.name);
        CHECK(c.get(a) == c.get(b));
    }
}

void require_same_columns(const RunData& a, const RunData& b) {
    require_same_columns(record::runs(), a.run, b.run);
    REQUIRE(a.trials.size() == b.trials.size());
    for (std::size_t i = 0; i < a.trials.size(); ++i) require_same_columns(record::trials(), a.trials[i], b.trials[i]);
    REQUIRE(a.measurements.size() == b.measurements.size());
    for (std::size_t i = 0; i < a.measurements.size(); ++i)
        require_same_columns(record::measurements(), a.measurements[i], b.measurements[i]);
}

}  // namespace

TEST_CASE("every column of each stored record crosses the store and the JSON export", "[results]") {
    auto d = every_column_set();
    // A column added to a record's description without a value here fails first.
    for (const auto& c : record::runs().columns) {
        INFO("runs." << c.name);
        CHECK(c.get(d.run) != c.get(Run{}));
    }
    for (const auto& c : record::trials().columns) {
        INFO("trials." << c.name);
        CHECK(
            std::any_of(d.trials.begin(), d.trials.end(), [&](const Trial& t) { return c.get(t) != c.get(Trial{}); }));
    }
    for (const auto& c : record::measurements().columns) {
        INFO("measurements." << c.name);
        CHECK(std::any_of(d.measurements.begin(), d.measurements.end(),
                          [&](const Measurement& m) { return c.get(m) != c.get(Measurement{}); }));
    }
    TempDir dir;
    {
        Store store(dir.path / "results.db");
        store_whole(store, d);
    }
    Store store(dir.path / "results.db", Store::Access::read_only);
    require_same_columns(d, store.load_run(d.run.id));
    require_same_columns(d, from_json(nlohmann::json::parse(to_json(d).dump())));
}
