// A probe spec from the TOML of one [[probe]] table, parsed as the loader parses it, for
// tests (the test fails with the parser's messages if it does not parse).
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include "core/config.h"
#include "core/diagnostic.h"
#include "probes/probe_spec.h"

namespace wanlab::testing {

/// [[probe]] kind = KIND, then `options` (TOML lines).
inline probes::ProbeSpec probe_of(const std::string& kind, const std::string& options) {
    config::Documents docs;
    Diagnostics diag;
    const auto* table = docs.parse("test", "[[probe]]\nkind = \"" + kind + "\"\n" + options, diag);
    REQUIRE(table);
    auto root = config::from_toml(*table);
    auto spec = probes::parse_probe(root.find("probe")->items.at(0), 0, std::chrono::milliseconds(300), diag);
    INFO(diag.render(docs.sources()));
    REQUIRE(!diag.has_errors());
    return spec;
}

}  // namespace wanlab::testing
