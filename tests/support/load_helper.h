// Loads an experiment from text in memory, as the CLI does from a file, for tests.
#pragma once

#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <vector>

#include "experiment/experiment.h"

namespace wanlab::testing {

struct Loaded {
    std::optional<experiment::Experiment> exp;
    std::string messages;  ///< every diagnostic, rendered with source lines
};

inline Loaded load(const std::string& text, const std::vector<std::string>& sets = {},
                   const std::string& name = "exp.toml", const std::vector<experiment::MadeVariant>* made = nullptr) {
    config::Documents docs;
    Diagnostics diag;
    experiment::ProfileLibrary profiles({WANLAB_TEST_PROFILES});
    Loaded out;
    out.exp = experiment::load_experiment(name, text, sets, profiles, docs, diag, made);
    out.messages = diag.render(docs.sources());
    return out;
}

/// The up direction of a [link] table written in TOML, resolved as the loader does
/// (the test fails with the loader's messages if it does not load).
inline netem::Direction up_of(const std::string& link) {
    auto l = load("[link]\n" + link);
    INFO(l.messages);
    REQUIRE(l.exp);
    return l.exp->trials[0].link.up;
}

}  // namespace wanlab::testing
