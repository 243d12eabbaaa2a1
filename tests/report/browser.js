/* browser.js - drives headless Chromium over the DevTools protocol
 * (puppeteer-core, from report/vendor) through one trace-report page for
 * test_report.py: loads it from file:// once per URL fragment and reads
 * the selection back from the DOM, then clicks and drags on the timeline
 * and reads the selection and the fragment again, taking a screenshot of
 * each state into OUTDIR. Prints one JSON object on stdout: {console:
 * [every console error and page error], at: {fragment: reading}, opened:
 * reading, hover_search: {details, share, frames} (a flame graph frame
 * hovered, then "main" typed in the search box; frames: each one's label
 * and whether it is drawn in the search's colour), inverted: reading (the
 * allocators-first view chosen then, for the rest), click: reading, drag:
 * reading}; a
 * reading is the process shown, the #selection-total element's data
 * (bytes, kind, t1, t2), the fragment, the table's first row, and the
 * numbers (data-i) of the flame graph's frames as they lie in the SVG.
 * With --diff instead of fragments, the page compares two runs
 * (trace-report --base; test_diff.py): it prints {console, diff: the
 * #diff-total element's data (bytes, base, new) and text, the table's
 * first row, hover: #diff-details after a frame of the differential flame
 * graph is hovered, frames: how many are drawn}, with one screenshot.
 * Never: judge anything (test_browser.py and test_diff.py do), or wait on
 * a clock for the page (it waits for the page's own ready flag).
 * Usage: node browser.js CHROMIUM PUPPETEER_DIR PAGE.html OUTDIR (FRAGMENT... | --diff)
 */
'use strict';
const path = require('path');
const [chromium, puppeteerDir, page, outdir, ...fragments] = process.argv.slice(2);
const puppeteer = require(path.resolve(puppeteerDir, 'puppeteer-core'));

const VIEW = { width: 1300, height: 1500 };
const CLICK_AT = 0.3;          // where on the timeline's width the click lands
const DRAG = [0.2, 0.8];       // and the drag's ends

async function reading(p) {
  return p.evaluate(() => {
    const el = document.getElementById('selection-total');
    const row = document.querySelector('#functions tbody tr');
    return { pid: document.getElementById('proc').value,
             bytes: Number(el.dataset.bytes), kind: el.dataset.kind, t1: Number(el.dataset.t1),
             t2: Number(el.dataset.t2), hash: location.hash, text: el.textContent,
             first_row: row ? [...row.cells].map((c) => c.textContent) : null,
             frame_ids: [...document.querySelectorAll('#flame svg g.frame')].map((g) =>
               Number(g.dataset.i)) };
  });
}

async function open(browser, url, errors) {
  const p = await browser.newPage();
  p.setDefaultTimeout(0);      // no clock of ours: the test's own timeout bounds a hang
  await p.setViewport(VIEW);
  p.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  p.on('pageerror', (e) => errors.push(String(e)));
  p.on('requestfailed', (r) => errors.push('request failed: ' + r.url()));
  await p.goto(url, { waitUntil: 'load' });
  await p.waitForSelector('body[data-ready="1"]');
  return p;
}

/* The comparison page: its totals, table and a hovered frame. */
async function diff(browser, url, out) {
  const p = await open(browser, url, out.console);
  await p.hover('#diff-flame svg g.frame');
  Object.assign(out, await p.evaluate(() => {
    const el = document.getElementById('diff-total');
    const row = document.querySelector('#diff-functions tbody tr');
    return { diff: { bytes: Number(el.dataset.bytes), base: Number(el.dataset.base),
                     new: Number(el.dataset.new), text: el.textContent },
             first_row: row ? [...row.cells].map((c) => c.textContent) : null,
             hover: document.getElementById('diff-details').textContent,
             frames: document.querySelectorAll('#diff-flame svg g.frame').length };
  }));
  await p.screenshot({ path: path.join(outdir, 'diff.png'), fullPage: true });
}

/* The report page: each fragment, then a hover, a search, a click and a drag. */
async function selections(browser, base, out) {
  for (const [i, f] of fragments.entries()) {
    const p = await open(browser, base + f, out.console);
    out.at[f] = await reading(p);
    await p.screenshot({ path: path.join(outdir, 'fragment-' + i + '.png'), fullPage: true });
    await p.close();
  }
  const p = await open(browser, base, out.console);
  out.opened = await reading(p);
  await p.hover('#flame svg g.frame');
  await p.type('#search', 'main');
  out.hover_search = await p.evaluate(() => ({
    details: document.getElementById('details').textContent,
    share: document.getElementById('search-share').textContent,
    frames: [...document.querySelectorAll('#flame svg g.frame')].map((g) =>
      [(g.querySelector('text') || {}).textContent || '',
       g.querySelector('rect').getAttribute('fill') === '#E600E6']) }));
  await p.select('#view', 'allocators');
  out.inverted = await reading(p);
  const box = await (await p.$('#timeline .u-over')).boundingBox();
  const y = box.y + box.height / 2;
  await p.mouse.click(box.x + box.width * CLICK_AT, y);
  out.click = await reading(p);
  await p.screenshot({ path: path.join(outdir, 'click.png'), fullPage: true });
  await p.mouse.move(box.x + box.width * DRAG[0], y);
  await p.mouse.down();
  await p.mouse.move(box.x + box.width * DRAG[1], y, { steps: 10 });
  await p.mouse.up();
  out.drag = await reading(p);
  await p.screenshot({ path: path.join(outdir, 'drag.png'), fullPage: true });
}

async function main() {
  const browser = await puppeteer.launch({ executablePath: chromium, headless: true, timeout: 0,
    args: ['--no-sandbox', '--disable-gpu', '--allow-file-access-from-files'] });
  const out = { console: [], at: {} };
  const base = 'file://' + path.resolve(page);
  try {
    if (fragments[0] === '--diff')
      await diff(browser, base, out);
    else
      await selections(browser, base, out);
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify(out) + '\n');
}

main().catch((e) => { process.stderr.write(String(e && e.stack || e) + '\n'); process.exit(1); });
