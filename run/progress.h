// Progress of a run as the user sees it: on a terminal one line that updates in place
// (trial i/N, what runs, elapsed, ETA); in a log (CI) plain lines, one per step; nothing
// with --quiet. Messages that matter (a trial whose emulation did not hold) are lines in
// every mode but quiet. Writes to stderr, so stdout carries only the report. Not thread-safe.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

namespace wanlab::run {

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
    void plan(std::chrono::duration<double> planned) { planned_ = planned.count(); }
    /// Where the run is: "[3/6] large-buffers link.rtt=40ms: bulk repeat 2/3". `done` is
    /// the planned time already covered, which scales the ETA to the pace so far.
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
    double planned_ = 0;
    bool dirty_ = false;
};

}  // namespace wanlab::run
