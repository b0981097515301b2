// The results database: every run, trial, measurement and sample in one SQLite file
// (<out>/results.db), plus JSON and CSV exports of a run.
//
// Why SQLite: one file a user can copy, query with `sqlite3` and attach to a bug report;
// atomic commits, so a run killed mid-way keeps every measurement committed before the kill;
// many runs (and runs of different experiments) side by side in the same file.
//
// Contract: Store opens the database read-write (creating it and its schema if needed) or
// read-only. The schema is versioned with PRAGMA user_version (a newer version is refused with
// a clear error) and its tables must be tables (a view or virtual table in place of one is
// refused). A symbolic link in place of the file is refused in both modes. Read-only stores
// never create or change the file, and bound every read in time (Store::kReadLimit), so a
// crafted database cannot hang a reader. Each write is its own
// transaction, committed before the call returns, so partial results survive Ctrl-C, an
// error or SIGKILL. Readers see runs as the model in model.h describes them. Failures throw
// wanlab::Error naming the database and SQLite's message. Not thread-safe: one Store per thread.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "results/model.h"

struct sqlite3;

namespace wanlab::results {

class Store {
public:
    enum class Access { read_write, read_only };
    /// How long one read of a read-only store may take before it fails (a few seconds:
    /// reading a 1,000-trial run takes well under one).
    static constexpr std::chrono::milliseconds kReadLimit{5000};

    /// read_write: creates the file and schema if missing (`wanlab run`). read_only: a missing
    /// file throws wanlab::InputError; each list_runs() or load_run() (and the schema check on
    /// opening) fails after `read_limit` with "took too long: is it a wanlab results database?".
    explicit Store(const std::filesystem::path& db, Access access = Access::read_write,
                   std::chrono::milliseconds read_limit = kReadLimit);
    ~Store();
    Store(const Store&) = delete;
    Store& operator=(const Store&) = delete;

    /// Records a new run (status "running") and, in the same transaction, its planned
    /// trials (more may follow, or be replaced, with put_trial()).
    void begin_run(const Run& run, const std::vector<Trial>& trials = {});
    /// Adds or replaces a trial of `run_id` (the runner writes it when planned and again
    /// when its emulation check and status are known).
    void put_trial(const std::string& run_id, const Trial& trial);
    void add_measurement(const std::string& run_id, const Measurement& m);
    /// Sets status, finished time, error and sessions of `run`.
    void finish_run(const Run& run);
    /// Continues a recorded run (`wanlab run --resume`), in one transaction: its status,
    /// finished time, error, sessions and planned trials become `run`'s, and each of `trials`
    /// not "done" is written anew without the measurements a cut-off session kept of it.
    void resume_run(const Run& run, const std::vector<Trial>& trials);

    /// Every run, newest first (trials and measurements left empty).
    std::vector<Run> list_runs();
    /// The run whose id is `id` or starts with it ("latest" = the newest); throws
    /// wanlab::InputError if none or several match.
    RunData load_run(const std::string& id);

    const std::filesystem::path& path() const { return path_; }

private:
    /// Starts the time limit of one read (read-only stores).
    void start_read();

    std::filesystem::path path_;
    Access access_;
    std::chrono::milliseconds read_limit_;
    std::chrono::steady_clock::time_point deadline_{};
    sqlite3* db_ = nullptr;
};

/// The run as JSON in base units: {"run":{...},"trials":[...],"measurements":[...]}; a
/// measurement's series as {"NAME": {"t": [...], "value": [...]}}.
nlohmann::json to_json(const RunData& data);
/// The inverse of to_json(), which the tests use to check what a run wrote.
RunData from_json(const nlohmann::json& j);
/// Parts of a run as to_json() writes them (NaN as JSON null), also the store's JSON columns:
/// `json j = env; j.get<Environment>()`. from_json throws nlohmann::json::exception. (Those
/// with every member required and nothing special, MachineEnvironment, Session and Capture, are
/// described beside their structs in results/model.h.)
void to_json(nlohmann::json& j, const Environment& env);
void from_json(const nlohmann::json& j, Environment& env);
void to_json(nlohmann::json& j, const RepeatRule& r);
void from_json(const nlohmann::json& j, RepeatRule& r);
void to_json(nlohmann::json& j, const EmulationCheck& check);
void from_json(const nlohmann::json& j, EmulationCheck& check);
/// One CSV row per (measurement, metric): run,trial,trial_id,variant,<sweep columns>,probe,
/// kind,tool,repeat,metric,value,unit. RFC 4180 quoting.
std::string to_csv(const RunData& data);
/// One CSV field: quoted as RFC 4180 asks, and a text a spreadsheet would run as a formula
/// (starting with = + - @, a tab or a carriage return, and not a number) led by a '.
std::string csv_field(std::string_view s);

}  // namespace wanlab::results
