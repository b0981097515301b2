// A wanlab report page in headless Chromium (Debian's, driven by playwright-core): it draws
// every chart with no console error and no network request, and each chart holds the
// series expected of it. Usage:
//   node report_page_test.mjs PAGE SCREENSHOT EXPECT
// EXPECT is JSON: {"CHART_ID": {"data": NAME, "field": FIELD, "has": [PREFIX...], "count": N}, ...}:
// the chart's dataset NAME has, among the distinct values of FIELD, one starting with each
// PREFIX (and N distinct values in all, when given). Prints one TAP line per check; exits 1
// on a failed one.
import { chromium } from 'playwright-core';
import path from 'node:path';

const [pagePath, screenshot, expectText] = process.argv.slice(2);
const expect = JSON.parse(expectText);
const url = 'file://' + path.resolve(pagePath);
let n = 0, failed = 0;
const check = (ok, what) => {
  n += 1;
  if (!ok) failed += 1;
  console.log(`${ok ? 'ok' : 'not ok'} ${n} - ${what}`);
};

// The flags the machine's probe found Chromium needs here (no sandbox as root, no
// background connections to Google's hosts).
const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
         '--disable-component-update', '--disable-sync'],
});
try {
  const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
  const errors = [], requests = [];
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('request', (r) => { if (r.url() !== url) requests.push(r.url()); });
  await page.goto(url);
  await page.waitForFunction(() => document.documentElement.dataset.charts, null, { timeout: 120000 });
  const state = await page.evaluate(() => document.documentElement.dataset.charts);
  check(state === 'ready', `every chart drawn [${state}]`);
  const found = await page.evaluate((expect) => {
    const out = {};
    for (const [id, e] of Object.entries(expect)) {
      const view = window.wanlabCharts && window.wanlabCharts[id];
      const el = document.getElementById(id);
      if (!view || !el) { out[id] = null; continue; }
      let values = [];
      try { values = [...new Set(view.data(e.data).map((d) => String(d[e.field])))]; } catch (err) { values = ['error: ' + err]; }
      const marks = el.querySelectorAll('svg path, svg line, svg rect, svg text').length;
      out[id] = { values, marks, axisTitles: [...el.querySelectorAll('svg .role-axis-title text')].map((t) => t.textContent) };
    }
    out.__charts = Object.keys(window.wanlabCharts || {});
    return out;
  }, expect);
  for (const [id, e] of Object.entries(expect)) {
    const f = found[id];
    check(f !== null, `chart ${id} is on the page and drawn`);
    if (!f) continue;
    for (const prefix of e.has || [])
      check(f.values.some((v) => v.startsWith(prefix)), `chart ${id}: ${e.field} has "${prefix}" [${f.values.join(', ')}]`);
    if (e.count !== undefined) check(f.values.length === e.count, `chart ${id}: ${e.count} ${e.field} values [${f.values.length}]`);
    check(f.marks > 10, `chart ${id}: drawn as SVG marks [${f.marks}]`);
    check(f.axisTitles.some((t) => /\(.+\)|time in the repeat|fraction/.test(t)),
          `chart ${id}: axes say their units [${f.axisTitles.join(' | ')}]`);
  }
  check(errors.length === 0, `no console error [${errors.join(' | ')}]`);
  check(requests.length === 0, `no network request [${requests.join(' ')}]`);
  await page.screenshot({ path: screenshot, fullPage: true });
  check(true, `screenshot ${screenshot}; charts on the page: ${found.__charts.join(', ')}`);
} finally {
  await browser.close();
}
process.exit(failed ? 1 : 0);
