// libFuzzer harness for the JSON that crosses a trust boundary (issue 40): what an agent reads
// from its controller (a service, a probe, link directions, a flow), what a controller reads
// from an agent (a far server's report, a probe's result), and a results record as an export
// or another machine's database carries it. Any bytes must be refused or read, never crash,
// hang or trip a sanitizer. Inputs that start with "db:" fill the JSON columns of a results
// database instead (one column per line), which Store then reads, exports and lists, as
// `results show`, `results merge` and `--resume` read a database someone else wrote.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <sqlite3.h>

#include "core/json.h"
#include "remote/protocol.h"
#include "results/store.h"

namespace {

template <typename F>
void tolerate(F&& f) {
    try {
        f();
    } catch (const std::exception&) {
        // a refusal is an answer
    }
}

// One run with a trial and a measurement, written once by Store: each input overwrites its
// JSON columns.
const std::string& database() {
    // Never destroyed: the exit handler that removes the file reads it after statics are gone.
    static const std::string& path = *new std::string([] {
        auto p = std::filesystem::temp_directory_path() / ("wanlab-fuzz-" + std::to_string(::getpid()) + ".db");
        std::filesystem::remove(p);
        wanlab::results::Store store(p);
        wanlab::results::Run run;
        run.id = "r1";
        run.experiment = "fuzz";
        store.begin_run(run);
        wanlab::results::Trial trial;
        trial.index = 1;
        trial.id = "t1";
        trial.variant = "default";
        store.put_trial("r1", trial);
        wanlab::results::Measurement m;
        m.trial = 1;
        m.probe = "p";
        m.kind = "rtt";
        m.repeat = 1;
        m.metrics["rtt_p50"] = 0.01;
        store.add_measurement("r1", m);
        std::atexit([] {
            std::error_code ec;
            std::filesystem::remove(database(), ec);
        });
        return p.string();
    }());
    return path;
}

void fill_database(std::string_view text) {
    static const char* const kColumns[][2] = {
        {"runs", "sets"},
        {"runs", "env"},
        {"runs", "sessions"},
        {"runs", "repeats"},
        {"trials", "sweep"},
        {"trials", "sysctls"},
        {"trials", "emulation_check"},
        {"trials", "captures"},
        {"measurements", "notes"},
        {"measurements", "connections"},
        {"measurements", "counters"},
    };
    std::vector<std::string_view> lines;
    for (std::size_t at = 0; at <= text.size();) {
        auto end = text.find('\n', at);
        if (end == std::string_view::npos) end = text.size();
        lines.push_back(text.substr(at, end - at));
        at = end + 1;
    }
    sqlite3* db = nullptr;
    if (sqlite3_open(database().c_str(), &db) != SQLITE_OK) __builtin_trap();  // the harness itself is broken
    for (std::size_t i = 0; i < std::size(kColumns); ++i) {
        auto sql = std::string("UPDATE ") + kColumns[i][0] + " SET " + kColumns[i][1] + " = ?";
        sqlite3_stmt* st = nullptr;
        if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) __builtin_trap();
        auto v = i < lines.size() ? lines[i] : std::string_view("{}");
        sqlite3_bind_text(st, 1, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
        sqlite3_step(st);
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    tolerate([] {
        wanlab::results::Store store(database(), wanlab::results::Store::Access::read_only);
        (void)store.list_runs();
        auto run = store.load_run("r1");
        (void)wanlab::json_input::dump(wanlab::results::to_json(run));
        (void)wanlab::results::to_csv(run);
    });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string_view text(reinterpret_cast<const char*>(data), size);
    if (text.starts_with("db:")) {
        fill_database(text.substr(3));
        return 0;
    }
    auto j = wanlab::json_input::parse(text);
    if (j.is_discarded()) return 0;
    (void)wanlab::json_input::dump(j, 2);
    tolerate([&] { (void)wanlab::remote::service_of(j); });
    tolerate([&] { (void)wanlab::remote::probe_of(j); });
    tolerate([&] { (void)wanlab::remote::direction_of(j); });
    tolerate([&] { (void)wanlab::remote::flow_of(j); });
    tolerate([&] { (void)wanlab::remote::far_report_of(j); });
    tolerate([&] {
        auto run = wanlab::results::from_json(j);
        (void)wanlab::json_input::dump(wanlab::results::to_json(run));
        (void)wanlab::results::to_csv(run);
    });
    return 0;
}
