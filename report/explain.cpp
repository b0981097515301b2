// explain(): sentences the measurements support, for the reader who asks "why this number?".
//
// Two kinds, and nothing without the data behind it:
//  - the diagnosis of each probe in each trial, as diagnosis/ concludes it from the evidence
//    it gathers beside its rules (diagnosis/evidence.h), placed and flagged here;
//  - bandwidth-delay advice, as diagnosis/buffers.h finds the buffer maxima short of a
//    trial's configured rate and RTT, worded here.
#include <cstdint>
#include <utility>

#include <fmt/format.h>

#include "diagnosis/evidence.h"
#include "diagnosis/rules.h"
#include "probes/probe.h"
#include "report/detail.h"

namespace wanlab::report {
namespace {

using probes::Unit;

std::string where(const results::Trial& t) {
    auto point = detail::point_label(t);
    return point.empty() ? t.variant : t.variant + " @ " + point;
}

std::string flag(const results::Trial& t) {
    return detail::emulation_failed(&t) ? " [! emulation did not hold in this trial]" : "";
}

// --- bandwidth-delay advice (diagnosis/buffers.h) -------------------------------------------

std::string bdp_sentence(const results::Trial& t, const diagnosis::BufferAdvice& a) {
    std::vector<std::string> below_bdp, below_twice, set;
    bool core = false, autotuned = false;
    for (const auto& b : a.short_buffers) {
        auto on = b.host.empty() ? std::string() : " on " + b.host;
        auto name = fmt::format("{}{}{} = {} ({})", b.key, b.triple ? " max" : "", on, b.fields.back(),
                                detail::human_bytes(static_cast<double>(b.fields.back()))) +
                    (b.before ? " before the run" : "");
        (b.below_bdp ? below_bdp : below_twice).push_back(name);
        if (b.triple)
            set.push_back(fmt::format("{}=\"{} {} {}\"{}", b.key, b.fields[0], b.fields[1], a.target_bytes, on));
        else
            set.push_back(fmt::format("{}={}{}", b.key, a.target_bytes, on));
        core = core || !b.triple;
        autotuned = autotuned || b.triple;
    }
    auto s = fmt::format("{}: bandwidth-delay product {} x {} = {} ({:.0f} bytes)", where(t),
                         probes::human(Unit::bits_per_second, t.link_rate), probes::human(Unit::seconds, t.link_rtt),
                         detail::human_bytes(a.bdp_bytes), a.bdp_bytes);
    auto list = [](const std::vector<std::string>& v) {
        std::string joined;
        for (const auto& x : v) joined += (joined.empty() ? "" : ", ") + x;
        return joined;
    };
    if (!below_bdp.empty()) s += "; below the BDP: " + list(below_bdp);
    if (!below_twice.empty())
        s += "; below 2 x BDP (the kernel keeps about half of a buffer for overhead): " + list(below_twice);
    s += fmt::format("; set {} ({}, the power of two at or above 2 x BDP)", list(set),
                     detail::human_bytes(static_cast<double>(a.target_bytes)));
    if (core)
        s += "; rmem_max/wmem_max cap what an explicit SO_RCVBUF/SO_SNDBUF (iperf3 -w) gets, and such a buffer is "
             "not autotuned";
    if (autotuned)
        s += "; tcp_rmem/tcp_wmem max cap the autotuned buffers of a probe that asks for none (rmem_max/wmem_max "
             "would not change it)";
    return s + flag(t);
}

}  // namespace

std::vector<Explanation> explanations(const results::RunData& data) {
    std::vector<Explanation> out;
    for (const auto& t : data.trials) {
        auto d = diagnosis::diagnose_trial(data, t);
        if (d.emulation)
            out.push_back({&t, "", d.emulation->rule, "trial", fmt::format("{}: {}", where(t), d.emulation->text)});
        for (const auto& p : d.probes) {
            const bool bound = p.verdicts.front().role == diagnosis::Role::binding;
            for (const auto& v : p.verdicts) {
                // The binding cause as the probe's answer; the rest marked, for the reader who
                // would otherwise weigh them alike.
                auto as = v.role == diagnosis::Role::binding ? "" : bound ? ", also observed" : ", observed";
                out.push_back({&t, p.probe, v.rule, diagnosis::to_string(v.role),
                               fmt::format("{}, {}{}: {}{}", p.probe, where(t), as, v.text, flag(t))});
            }
        }
        if (d.buffers) out.push_back({&t, "", "bandwidth-delay", "advice", bdp_sentence(t, *d.buffers)});
    }
    return out;
}

std::vector<std::string> explain(const results::RunData& data) {
    std::vector<std::string> out;
    for (auto& e : explanations(data)) out.push_back(std::move(e.text));
    return out;
}

}  // namespace wanlab::report
