#include "run/progress.h"

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

namespace wanlab::run {

Progress::Mode Progress::detect(std::FILE* stream) {
    const char* term = std::getenv("TERM");
    bool dumb = term && std::strcmp(term, "dumb") == 0;
    return ::isatty(::fileno(stream)) && !dumb ? Mode::terminal : Mode::lines;
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
    // Planned time left, stretched by how much slower than planned the run has been so far.
    double pace = done.count() > 1 ? elapsed / done.count() : 1.0;
    double eta = std::max(0.0, planned_ - done.count()) * pace;
    std::string text = fmt::format("{} | {} elapsed, ETA {}", what, clock(elapsed), clock(eta));
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
    put("wanlab: " + text + "\n");
    std::fflush(out_);
}

void Progress::clear() {
    if (dirty_) {
        put("\r\x1b[K");
        std::fflush(out_);
        dirty_ = false;
    }
}

}  // namespace wanlab::run
