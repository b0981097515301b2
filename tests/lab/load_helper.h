// Loads an experiment from text in memory, as the CLI does from a file, for tests.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "lab/experiment.h"

namespace wanlab::testing {

struct Loaded {
    std::optional<lab::Experiment> exp;
    std::string messages;  ///< every diagnostic, rendered with source lines
};

inline Loaded load(const std::string& text, const std::vector<std::string>& sets = {},
                   const std::string& name = "exp.toml") {
    config::Documents docs;
    Diagnostics diag;
    lab::ProfileLibrary profiles({WANLAB_TEST_PROFILES});
    Loaded out;
    out.exp = lab::load_experiment(name, text, sets, profiles, docs, diag);
    out.messages = diag.render(docs.sources());
    return out;
}

}  // namespace wanlab::testing
