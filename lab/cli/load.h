// Shared by the sub-commands that read an experiment file: read it, load it, print every
// diagnostic to stderr. Throws InputError (exit 2) when the file cannot be read or has errors.
#pragma once

#include <string>
#include <vector>

#include "lab/experiment.h"

namespace wanlab::cli {

lab::Experiment load_or_throw(const std::string& path, const std::vector<std::string>& sets);

}  // namespace wanlab::cli
