// The evidence each diagnosis rule judges (diagnosis/rules.h), gathered from a stored run: a
// probe's repeats in one trial (its metrics, TCP_INFO per connection, notes), the kernel
// counters recorded around each repeat (diagnosis/counters.h), the link's qdisc statistics
// (diagnosis/qdisc_watch.h) and the trial's configuration.
//
// Contract: pure functions of the results model (results/model.h). Evidence holds medians
// over the repeats in base units; NaN where no repeat recorded the value. diagnose_trial()
// is everything diagnosis/ concludes of a trial; report/ only words and places it.
// Thread-safe.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "diagnosis/buffers.h"
#include "diagnosis/rules.h"
#include "results/model.h"

namespace wanlab::diagnosis {

/// Some repeats of one probe in one trial, in the order stored.
using Repeats = std::vector<const results::Measurement*>;

/// The evidence of one probe in trial `t`, from `repeats`: at least one, all of that probe in
/// that trial. Its kind is the first repeat's.
Evidence evidence_of(const results::Trial& t, const Repeats& repeats);

/// Trial `t`'s repeats per probe, the probes in the order they were first measured.
std::vector<std::pair<std::string, Repeats>> repeats_by_probe(const results::RunData& data, const results::Trial& t);

/// What the rules conclude of one probe in one trial.
struct ProbeDiagnosis {
    std::string probe;
    std::vector<Verdict> verdicts;  ///< diagnose()'s: the binding one (if any) first; never empty
};

/// Each probe of trial `t` that any rule has a verdict for, judged on its repeats that
/// measured (a repeat whose tool refused has no metrics), in repeats_by_probe()'s order.
std::vector<ProbeDiagnosis> diagnose_probes(const results::RunData& data, const results::Trial& t);

/// What diagnosis/ concludes of one trial, in the order a report gives it.
struct TrialDiagnosis {
    std::optional<Verdict> emulation;     ///< emulation_not_held(), the trial's own rule
    std::vector<ProbeDiagnosis> probes;   ///< diagnose_probes()
    std::optional<BufferAdvice> buffers;  ///< for its bulk transfers; none when another cause binds one
};

/// The trial's own rule, each probe's verdicts, and bandwidth-delay advice for the bulk
/// transfers' buffers (diagnosis/buffers.h) unless a bulk probe's binding verdict is one that
/// bigger buffers cannot lift (rate-bound, loss-bound, queue-overflow, cpu-bound): a link whose
/// rate is the bound gains nothing from bigger buffers, nor does a stream that loss holds back.
TrialDiagnosis diagnose_trial(const results::RunData& data, const results::Trial& t);

}  // namespace wanlab::diagnosis
