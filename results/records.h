// Each stored record (a run, a trial, a measurement) described once, as a table of its
// columns: the SQL column, its type, the JSON key of the export, and how the struct member
// becomes a value and back. store.cpp builds CREATE TABLE, INSERT, UPDATE and SELECT from
// these descriptions; export.cpp the JSON export and import. Adding a column is one row here
// (and, for a store already on disk, its ALTER TABLE step in store.cpp's migrations, which
// are history and stay as they ran).
//
// A measurement's metrics, samples and series are child tables (one row per value), not
// columns: store.cpp and export.cpp write them out. A JSON column's value (Environment,
// Session, ...) is serialized by its to_json/from_json in store.h.
//
// Contract: the descriptions are constant and in the tables' column order; the CREATE TABLE
// text they give is the one schema version 6 has always had, byte for byte (SQLite keeps it
// in sqlite_master). A column a store of an older schema version lacks reads as `older`,
// and a key an older export lacks (any column added after version 1) keeps the struct's
// default. Pure; thread-safe.
#pragma once

#include <cmath>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "results/model.h"

namespace wanlab::results::record {

/// How a column's value is kept in SQLite. In the JSON export it is the same value, a JSON
/// column's nested rather than as text.
enum class Storage {
    text,     ///< TEXT, a JSON string
    integer,  ///< INTEGER, a JSON number
    real,     ///< REAL, NULL for NaN; a JSON number, null for NaN
    json,     ///< TEXT holding JSON
};

template <class Record>
struct Column {
    const char* name;  ///< the SQL column
    const char* decl;  ///< its type and constraints: "TEXT NOT NULL DEFAULT ''"
    const char* key;   ///< the JSON key of the export
    Storage storage;
    int since = 1;             ///< the schema version that added it
    const char* older = "";    ///< what a store before `since` reads as (an SQL literal)
    const char* comment = "";  ///< CREATE TABLE's comment after the column, or ""
    const char* above = "";    ///< CREATE TABLE's comment on a line above it, or ""
    nlohmann::json (*get)(const Record&) = nullptr;
    /// Throws nlohmann::json::exception for a value of the wrong type.
    void (*set)(Record&, const nlohmann::json&) = nullptr;

    /// The same column with its export key, version, or comments set.
    constexpr Column keyed(const char* k) const { return with(&Column::key, k); }
    constexpr Column added(int version, const char* value_before) const {
        Column c = with(&Column::older, value_before);
        c.since = version;
        return c;
    }
    constexpr Column commented(const char* text) const { return with(&Column::comment, text); }
    constexpr Column noted(const char* text) const { return with(&Column::above, text); }

private:
    constexpr Column with(const char* Column::*field, const char* v) const {
        Column c = *this;
        c.*field = v;
        return c;
    }
};

template <class Record>
struct Table {
    const char* name;
    const char* head;  ///< CREATE TABLE's columns outside the record (run_id), verbatim lines
    std::span<const Column<Record>> columns;
    const char* tail;  ///< table constraints after the columns, verbatim lines ("" for none)
};

const Table<Run>& runs();
const Table<Trial>& trials();
const Table<Measurement>& measurements();

/// A number, or null for NaN ("not measured").
inline nlohmann::json number(double v) { return std::isnan(v) ? nlohmann::json(nullptr) : nlohmann::json(v); }
inline double number_from(const nlohmann::json& j) { return j.is_null() ? kNaN : j.get<double>(); }

/// The table's CREATE TABLE statement (with its ";\n").
template <class Record>
std::string create_table(const Table<Record>& t);

/// "a, b, c": the record's columns, in order, for INSERT and SELECT; for a store of schema
/// `version`, a column it lacks as its `older` value.
template <class Record>
std::string column_list(const Table<Record>& t, int version = 1 << 30);

/// The record as its export writes it: each column's value under its key.
template <class Record>
nlohmann::json to_json(const Table<Record>& t, const Record& r);

/// Reads each column's key into `r`; a key added after version 1 may be missing. Throws
/// nlohmann::json::exception.
template <class Record>
void from_json(const Table<Record>& t, const nlohmann::json& j, Record& r);

/// The column named `name`; throws std::out_of_range for none.
template <class Record>
const Column<Record>& column(const Table<Record>& t, std::string_view name);

}  // namespace wanlab::results::record
