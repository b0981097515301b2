#include "run/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "core/text.h"
#include "probes/group.h"
#include "run/trial.h"

namespace wanlab::run {
double planned_seconds(const experiment::Trial& t, const experiment::RunSpec& run) {
    double s = checks_emulation(t) ? kCheckSeconds : 0;
    for (const auto& g : probes::probe_groups(t.probes)) {  // a group's members at the same time
        bool warm = std::any_of(g.members.begin(), g.members.end(), [](const auto* p) { return warms_up(*p); });
        s += (warm ? ns_to_s(run.warmup.count()) : 0) +
             run.first_repeats() * (longest(g) + ns_to_s(run.cooldown.count()));
    }
    return s;
}

double repeat_seconds(const experiment::Trial& t, const experiment::RunSpec& run) {
    double s = 0;
    for (const auto& g : probes::probe_groups(t.probes)) s += longest(g) + ns_to_s(run.cooldown.count());
    return s;
}

Progress::Mode Progress::detect(std::FILE* stream) {
    const char* term = std::getenv("TERM");
    bool dumb = term && std::strcmp(term, "dumb") == 0;
    return ::isatty(::fileno(stream)) && !dumb ? Mode::terminal : Mode::lines;
}

double EtaEstimator::at(double elapsed, double done) {
    if (!started_) {
        started_ = true;
        first_elapsed_ = elapsed;
        first_done_ = done;
    }
    const double measured_plan = done - first_done_;
    // Beyond plan per planned second; a faster-than-planned run can at most halve what is left.
    const double overhead =
        measured_plan > 0 ? std::max(-0.5, (elapsed - first_elapsed_ - measured_plan) / measured_plan) : 0.0;
    const double trust = measured_plan / (measured_plan + kTrustSeconds);
    return std::max(0.0, planned_ - done) * (1 + trust * overhead);
}

Progress::Progress(Mode mode, std::FILE* stream) : mode_(mode), out_(stream) {}

Progress::~Progress() { clear(); }

std::string Progress::clock(double s) {
    if (!std::isfinite(s) || s < 0) return "?";
    auto t = static_cast<long long>(s + 0.5);
    if (t >= 3600) return fmt::format("{}h{:02}m", t / 3600, t % 3600 / 60);
    if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
    return fmt::format("{}s", t);
}

void Progress::put(const std::string& text) {
    // Never throws: a progress reader that went away must not end the run mid-change.
    std::fputs(text.c_str(), out_);
}

void Progress::status(const std::string& what, std::chrono::duration<double> done) {
    if (mode_ == Mode::quiet) return;
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    double eta = eta_.at(elapsed, done.count());
    // Names from the file, a service's or an agent's words: never raw to a terminal.
    std::string text = fmt::format("{} | {} elapsed, ETA {}", text::terminal_safe(what), clock(elapsed), clock(eta));
    if (mode_ == Mode::terminal) {
        put("\r\x1b[K" + text);
        dirty_ = true;
    } else {
        put("wanlab: " + text + "\n");
    }
    std::fflush(out_);
}

void Progress::line(const std::string& text) {
    if (mode_ == Mode::quiet) return;
    clear();
    put("wanlab: " + text::terminal_safe(text) + "\n");
    std::fflush(out_);
}

void Progress::clear() {
    if (dirty_) {
        put("\r\x1b[K");
        std::fflush(out_);
        dirty_ = false;
    }
}

double RepeatForecast::decided(double repeat_seconds, unsigned repeats) {
    double change = (repeats - assumed_) * repeat_seconds;  // this one was planned at assumed_
    left_ = std::max(0.0, left_ - repeat_seconds);
    ++decisions_;
    sum_ += repeats;
    double mean = sum_ / decisions_;
    change += (mean - assumed_) * left_;  // the rest, planned anew at the mean so far
    assumed_ = mean;
    return change;
}

}  // namespace wanlab::run
