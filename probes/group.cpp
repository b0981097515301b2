#include "probes/group.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"

namespace wanlab::probes {
namespace {

using namespace std::chrono_literals;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A member's tick throws this once the group is cancelled: another member failed, or Ctrl-C.
class Cancelled : public Error {
public:
    Cancelled() : Error("cancelled: another probe of the group stopped") {}
};

}  // namespace

std::string group_of(const ProbeSpec& spec) {
    auto it = spec.options.find("group");
    if (it == spec.options.end()) return "";
    auto s = std::get_if<std::string>(&it->second);
    return s ? *s : "";
}

std::vector<ProbeGroup> probe_groups(const std::vector<ProbeSpec>& probes) {
    std::vector<ProbeGroup> out;
    for (const auto& p : probes) {
        auto name = group_of(p);
        auto same =
            std::find_if(out.begin(), out.end(), [&](const auto& g) { return !name.empty() && g.name == name; });
        if (same != out.end())
            same->members.push_back(&p);
        else
            out.push_back({name, {&p}});
    }
    return out;
}

std::vector<ProbeSpec> with_group_records(const std::vector<ProbeSpec>& probes) {
    auto out = probes;
    for (const auto& g : probe_groups(probes)) {
        if (g.name.empty()) continue;
        ProbeSpec record;
        record.name = g.name;
        record.kind = "group";
        record.at = g.members.front()->at;
        out.push_back(std::move(record));
    }
    return out;
}

double jain_index(const std::vector<double>& x) {
    double sum = 0, squares = 0;
    for (double v : x) {
        if (!std::isfinite(v) || v < 0) return kNaN;
        sum += v;
        squares += v * v;
    }
    if (x.empty() || !(squares > 0)) return kNaN;
    return sum * sum / (static_cast<double>(x.size()) * squares);
}

double flow_fairness(const ProbeResult& r) {
    std::vector<double> flows;
    for (const auto& c : r.connections)
        if (auto it = c.values.find("throughput"); it != c.values.end()) flows.push_back(it->second);
    return flows.size() < 2 ? kNaN : jain_index(flows);
}

std::vector<JobOutcome> run_together(const std::vector<GroupJob>& jobs, const Tick& tick) {
    std::vector<JobOutcome> out(jobs.size());
    std::vector<std::exception_ptr> failures(jobs.size());
    std::mutex mutex;
    std::condition_variable ended;
    std::size_t running = jobs.size();
    std::atomic<bool> cancel{false};
    // The release: every thread waits for `go` (a latch of one, without <latch>, which
    // clang 14 cannot build from libstdc++ 12's header for the fuzzer).
    bool go = false;
    std::condition_variable released_cv;
    auto release = [&] {
        std::lock_guard lock(mutex);
        go = true;
        released_cv.notify_all();
    };
    const Tick member_tick = [&cancel] {
        if (cancel.load()) throw Cancelled();
    };
    std::vector<std::thread> threads;
    auto finish = [&] {  // every thread released (if it waits still) and joined
        release();
        for (auto& t : threads) t.join();
    };
    try {
        for (std::size_t i = 0; i < jobs.size(); ++i)
            threads.emplace_back([&, i] {
                {
                    std::unique_lock lock(mutex);
                    released_cv.wait(lock, [&] { return go; });
                }
                try {
                    out[i].result = jobs[i](member_tick);
                } catch (const MeasurementError& e) {
                    out[i].error = e.what();
                } catch (...) {
                    failures[i] = std::current_exception();
                    cancel.store(true);
                }
                std::lock_guard lock(mutex);
                --running;
                ended.notify_all();
            });
        auto released = std::chrono::steady_clock::now();
        for (auto& o : out) o.released = released;
        release();
        std::unique_lock lock(mutex);
        while (running > 0) {
            ended.wait_for(lock, 50ms);
            lock.unlock();
            if (tick) tick();  // Ctrl-C: throws, and the members are cancelled below
            lock.lock();
        }
    } catch (...) {
        cancel.store(true);
        finish();
        throw;
    }
    finish();
    // The first real failure, not the cancellations it caused.
    std::exception_ptr cancelled;
    for (const auto& f : failures) {
        if (!f) continue;
        try {
            std::rethrow_exception(f);
        } catch (const Cancelled&) {
            cancelled = f;
        } catch (...) {
            throw;
        }
    }
    if (cancelled) std::rethrow_exception(cancelled);
    return out;
}

void align_series(ProbeResult& r, std::chrono::steady_clock::time_point zero) {
    if (!r.began) return;
    double shift = std::chrono::duration<double>(*r.began - zero).count();
    for (auto& [name, s] : r.series)
        for (double& t : s.t) t += shift;
}

ProbeResult group_result(const std::vector<MemberRun>& members) {
    ProbeResult g;
    g.kind = "group";
    g.tool = "builtin";
    std::vector<double> flows;
    double throughput = 0;
    bool any_throughput = false;
    double measured = 0;
    for (const auto& m : members) {
        if (!m.result) {
            g.notes.push_back(fmt::format("member {}: no measurement: {}", m.spec->name, m.error));
            continue;
        }
        ++measured;
        const auto& r = *m.result;
        const auto& traits = traits_of(m.spec->kind);
        if (traits.bulk_tcp) {
            any_throughput = true;
            if (auto it = r.metrics.find("throughput"); it != r.metrics.end()) throughput += it->second;
            for (const auto& c : r.connections)
                if (auto it = c.values.find("throughput"); it != c.values.end()) flows.push_back(it->second);
        }
        for (const char* name : traits.group_series)
            if (auto it = r.series.find(name); it != r.series.end()) g.series[m.spec->name + "." + name] = it->second;
    }
    g.metrics["members"] = measured;
    if (any_throughput) {
        g.metrics["throughput"] = throughput;
        g.metrics["flows"] = static_cast<double>(flows.size());
        if (flows.size() >= 2) g.metrics["fairness"] = jain_index(flows);
    }
    return g;
}

}  // namespace wanlab::probes
