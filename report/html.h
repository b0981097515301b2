// The report as one self-contained HTML page: every section of the text report (run,
// environment, tables, explanations, asserts, captures) and charts drawn by Vega-Lite from
// specifications built here: the sweep as a line per variant with confidence whiskers,
// before/after bars with intervals and significance marks, time series per repeat, latency
// distributions, the emulation check configured against measured.
//
// Contract: pure. The document carries its scripts (report/assets.h), styles and data
// inline, uses the system's fonts, and forbids itself any network request with a Content
// Security Policy (default-src 'none'); it works from a file:// URL, attached to a bug report
// or a CI artifact. Each chart is one element with a Chart's id; the page's script draws
// them all, keeps each Vega view in window.wanlabCharts[id] and sets
// document.documentElement.dataset.charts to "ready" (or "failed: ..."), which the browser
// test waits for. Thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/model.h"

namespace wanlab::report::html {

/// One chart: a Vega-Lite specification drawn into the element `id`. Its data is inline and
/// named (`data.name`), so a test can read it back from the drawn view.
struct Chart {
    std::string id;
    std::string title;
    nlohmann::ordered_json spec;
};

/// `text` safe as HTML element content or a quoted attribute value.
std::string escape(std::string_view text);

/// A page being put together: its sections in order, the charts they place, then the whole
/// document.
class Page {
public:
    explicit Page(std::string title);
    /// Opens a section (closing the one before) with a heading, listed in the page's contents.
    void section(const std::string& id, const std::string& title);
    void markup(const std::string& html);  ///< as given: build it with escape()
    void paragraph(const std::string& text, const std::string& css_class = "");
    void list(const std::vector<std::string>& items, const std::string& css_class = "");
    void table(const detail::TextTable& t);
    /// Places `c` here, with a caption under it.
    void chart(Chart c, const std::string& caption = "");
    std::string document() const;

private:
    std::string title_, body_;
    std::vector<std::pair<std::string, std::string>> contents_;  // (id, title)
    std::vector<Chart> charts_;
    bool open_ = false;
};

/// The charts of a run's page, in page order.
std::vector<Chart> run_charts(const detail::Model& m);
/// The run's page.
std::string run_page(const detail::Model& m);

/// How a metric's values are drawn on an axis: divided by `divisor`, labelled `label`
/// ("Mbit/s", "ms", "%", "count").
struct AxisUnit {
    double divisor = 1;
    std::string label;
};
AxisUnit axis_unit(probes::Unit unit, double largest);

}  // namespace wanlab::report::html
