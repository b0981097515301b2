// The JavaScript every HTML report carries inline: Vega and Vega-Lite, the plotting library
// that draws its charts (BSD-3-Clause). Installed by scripts/setup (`npm ci` in
// report/assets) and compiled into the binary (report/assets.cpp.in), so a page works
// offline and wanlab needs no files at run time.
#pragma once

#include <string_view>

namespace wanlab::report::assets {

struct Script {
    std::string_view name;     ///< "vega", "vega-lite"
    std::string_view version;  ///< as its package.json says
    std::string_view text;     ///< the minified UMD bundle
};

/// In the order the page loads them (Vega-Lite needs Vega).
const Script& vega();
const Script& vega_lite();

}  // namespace wanlab::report::assets
