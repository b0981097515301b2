// Progress of a run as the user sees it: on a terminal one line that updates in place
// (trial i/N, what runs, elapsed, ETA); in a log (CI) plain lines, one per step; nothing
// with --quiet. Messages that matter (a trial whose emulation did not hold) are lines in
// every mode but quiet. Writes to stderr, so stdout carries only the report. Not thread-safe.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

#include "experiment/experiment.h"

namespace wanlab::run {

/// Seconds one trial is planned to take (emulation check, warm-up, repeats x (duration +
/// cooldown)), for ETAs; with adaptive repeats, at the rule's first repeats (RepeatForecast
/// corrects it as it runs).
double planned_seconds(const experiment::Trial& t, const experiment::RunSpec& run);
/// Seconds one repeat of every probe (or group) of a trial takes, cooldown included.
double repeat_seconds(const experiment::Trial& t, const experiment::RunSpec& run);

/// The time left of a run, from its plan and the overhead measured so far: the planned
/// seconds left, stretched by the time beyond plan (apply, process starts, slack) per planned
/// second since the first estimate. That overhead is trusted in proportion to the plan it was
/// measured over (none at first, half after kTrustSeconds), so the first few steps, which
/// carry the lab's set-up, do not swing the ETA. Pure; not thread-safe.
class EtaEstimator {
public:
    static constexpr double kTrustSeconds = 30;

    /// `planned`: the run's total planned seconds.
    void plan(double planned) { planned_ = planned; }
    /// Seconds left when `elapsed` wall seconds have gone and `done` planned seconds are covered.
    double at(double elapsed, double done);

private:
    double planned_ = 0;
    bool started_ = false;
    double first_elapsed_ = 0, first_done_ = 0;
};

/// The planned time of a run whose repeats are adaptive ([run] repeats = "auto"): every
/// (trial, probe) is planned at the rule's first repeats until measured; each one that has
/// decided its count corrects the plan by what it adds, and the ones still to come are then
/// planned at the mean count decided so far. Pure; not thread-safe.
class RepeatForecast {
public:
    /// `first`: the rule's first repeats; `repeat_seconds`: the seconds one repeat of every
    /// (trial, probe) still to measure takes, summed (cooldown included).
    RepeatForecast(unsigned first, double repeat_seconds) : assumed_(first), left_(repeat_seconds) {}
    /// One (trial, probe) of `repeat_seconds` per repeat decided on `repeats`: the seconds
    /// the run's plan changes by (negative when it shrinks).
    double decided(double repeat_seconds, unsigned repeats);
    /// The repeats the plan assumes for each one still to decide.
    double assumed() const { return assumed_; }

private:
    double assumed_, left_;
    double decisions_ = 0, sum_ = 0;
};

class Progress {
public:
    enum class Mode { terminal, lines, quiet };
    /// terminal when `stream` is a tty and TERM is not "dumb", else lines.
    static Mode detect(std::FILE* stream);

    Progress(Mode mode, std::FILE* stream = stderr);
    ~Progress();
    Progress(const Progress&) = delete;
    Progress& operator=(const Progress&) = delete;

    /// The total planned measuring time, for the ETA.
    void plan(std::chrono::duration<double> planned) { eta_.plan(planned.count()); }
    /// Where the run is: "[3/6] large-buffers link.rtt=40ms: bulk repeat 2/3". `done` is
    /// the planned time already covered, from which EtaEstimator gives the ETA.
    void status(const std::string& what, std::chrono::duration<double> done);
    /// A line that stays (clears the status line first on a terminal).
    void line(const std::string& text);

    /// "1h02m", "4m05s", "12s".
    static std::string clock(double seconds);

private:
    void clear();
    void put(const std::string& text);
    Mode mode_;
    std::FILE* out_;
    std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
    EtaEstimator eta_;
    bool dirty_ = false;
};

}  // namespace wanlab::run
