/* report_page.js - times a trace-report page in headless Chromium for
 * bench/run.py (bench_report): opens it from file:// RUNS times in a new
 * page and reads, as the browser measured them, its first contentful
 * paint and the instant its first selection was drawn (body's
 * data-ready-ms); then, in the last page, times SELECTIONS new selections
 * (clicks on the timeline at spread places, and one drag): from the
 * mouse event to the next frame painted after it. Prints one JSON object:
 * {paint_ms: [...], ready_ms: [...], select_ms: [...], drag_ms}.
 * Never: judge the figures (run.py prints them), or run from the tests.
 * Usage: node report_page.js CHROMIUM PUPPETEER_DIR PAGE.html RUNS
 */
'use strict';
const path = require('path');
const [chromium, puppeteerDir, page, runs] = process.argv.slice(2);
const puppeteer = require(path.resolve(puppeteerDir, 'puppeteer-core'));

const SELECTIONS = 9;          // clicks timed, at 10 %, 20 % ... of the timeline
const VIEW = { width: 1300, height: 1500 };

/* In the page: dispatches a press at fraction a and a release at b of the
 * timeline's width, returns the ms until the frame after the new selection. */
function timeSelection(a, b) {
  const over = document.querySelector('#timeline .u-over');
  const r = over.getBoundingClientRect();
  const at = (f) => ({ clientX: r.left + r.width * f, clientY: r.top + r.height / 2,
                       bubbles: true });
  return new Promise((done) => {
    const t0 = performance.now();
    over.dispatchEvent(new MouseEvent('mousedown', at(a)));
    over.dispatchEvent(new MouseEvent('mouseup', at(b)));
    requestAnimationFrame(() => setTimeout(() => done(performance.now() - t0), 0));
  });
}

async function main() {
  const browser = await puppeteer.launch({ executablePath: chromium, headless: true, timeout: 0,
    args: ['--no-sandbox', '--disable-gpu'] });
  const out = { paint_ms: [], ready_ms: [], select_ms: [] };
  try {
    let p = null;
    for (let i = 0; i < Number(runs); i++) {
      if (p) await p.close();
      p = await browser.newPage();
      p.setDefaultTimeout(0);
      await p.setViewport(VIEW);
      await p.goto('file://' + path.resolve(page), { waitUntil: 'load' });
      await p.waitForSelector('body[data-ready="1"]');
      const m = await p.evaluate(() => ({
        paint: (performance.getEntriesByName('first-contentful-paint')[0] || {}).startTime,
        ready: Number(document.body.dataset.readyMs) }));
      out.paint_ms.push(m.paint);
      out.ready_ms.push(m.ready);
    }
    for (let k = 1; k <= SELECTIONS; k++)
      out.select_ms.push(await p.evaluate(timeSelection, k / 10, k / 10));
    out.drag_ms = await p.evaluate(timeSelection, 0.2, 0.8);
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify(out) + '\n');
}

main().catch((e) => { process.stderr.write(String(e && e.stack || e) + '\n'); process.exit(1); });
