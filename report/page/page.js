/* page.js - the behaviour of trace-report's page: reads the data that
 * trace-report wrote (the <script id="data"> element), draws the timeline
 * (uPlot), the flame graph (its own SVG; d3-flame-graph draws a
 * comparison's) and the table of functions of the selection, and keeps the
 * selection and the URL fragment in step.
 *
 * The data (report/json.c writes it): {db, default_pid, procs, stacks,
 * frames, fns, files}. A stack is a list of frame indexes, leaf first; a
 * frame is three numbers in `frames` (function index into fns, file index
 * into files, line). Each process has its facts (pid, exe, cmdline,
 * t_start, t_end, sample_period, lost_events, peak_t, peak_bytes, allocs,
 * frees, rss_peak_t), `lacks` (what the whole run's answers lack),
 * `timeline` (bucket start, live bytes at its end, most live bytes in it:
 * three numbers per bucket), `rss` (instant, bytes), `marks` ([instant,
 * label]), `points` (the precomputed instants, ascending) with `snaps` (a
 * profile each) and `kinds` (null, or the live bytes of each kind of
 * memory at each point: {heap: [...], mmap: [...], custom: [...]}), `grid`
 * (indexes into points) with `steady` (a profile per pair i < j of the
 * grid, in that order), and the profiles peak, leaks and temporary. A
 * profile is {rows, t1, t2, lacks}; rows hold five numbers per stack:
 * stack index, live objects, live bytes, allocated objects, allocated
 * bytes (unbiased, as trace-snap's text). Times are nanoseconds on the
 * database's axis.
 *
 * A comparison of two runs (trace-report NEW --base OLD) has no procs but
 * `diff`: {runs: [base, new] (each the facts above, its db, the question
 * asked of it: at, peak, growth, steady, leaks or temporary, with t1, t2,
 * shrank: [stacks, bytes] that shrank in a growth, not in the widths, and
 * its lacks), total: [base, new] live bytes, base_only: [paths, bytes]
 * of the base that the new run's widths do not draw, tree: the call tree by
 * function and file of both, a node after its parent, each [parent index
 * (-1: the root), name, base bytes, base objects, new bytes, new objects],
 * functions: [name, flat base, flat new, cum base, cum new] by the size of
 * the change}. The page shows it as it is: the comparison is computed by
 * trace-report (queries/diff.c), never here.
 *
 * Never: fetch anything (the page works offline); show a number that is
 * not exact without saying what it is instead.
 */
'use strict';

const D = JSON.parse(document.getElementById('data').textContent);
const NS_PER_S = 1e9;
const ROW = 5;                 // numbers per stack in a profile's rows
const COL = { liveN: 1, liveB: 2, allocN: 3, allocB: 4 };
const TABLE_ROWS = 300;        // functions shown; the rest are summed in a note
const CLICK_PX = 3;            // a drag shorter than this is a click
const MARK_LABEL = 24;         // characters of a mark's label drawn on the timeline
const KIND_COLORS = ['#2a9d4b', '#9b4dca'];   // the timeline's lines of mmap, custom
const MIN_FRAME_PX = 5;        // narrower flame graph frames are not drawn (1 px: 3x slower)
const UNITS = { ns: 1n, us: 1000n, ms: 1000000n, s: 1000000000n,
                m: 60000000000n, h: 3600000000000n, '': 1000000000n };

const $ = (id) => document.getElementById(id);
let proc = null;               // the process shown
let sel = null;                // the selection: {kind, t1, t2, asked1, asked2}
let plot = null;               // the uPlot timeline
let shown = null;              // the selection's profile: {rows, title, note, lacks}
let sortCol = 'self_b';

/* ---- numbers and times --------------------------------------------------- */

/* As q_human_bytes: binary units to a tenth, beside the exact count. */
function human(b) {
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let v = Math.abs(b), k = 0;
  while (v >= 1024 && k < u.length - 1) { v /= 1024; k++; }
  return (b < 0 ? '-' : '') + (k ? v.toFixed(1) + ' ' + u[k] : v + ' B');
}
function bytes(b) { return b + ' B (' + human(b) + ')'; }
function fmtT(ns) {
  const s = Math.trunc(ns / NS_PER_S), r = ns - s * NS_PER_S;
  return s + '.' + String(r).padStart(9, '0') + 's';
}

/* An instant as trace-snap takes it (queries/when.c), exactly: "30s",
 * "1.5m", "250ms", "45%", "mark:LABEL", "start", "end". Throws on a
 * malformed one or one outside the process's span. */
function parseTime(p, spec) {
  let t;
  if (spec === 'start') t = p.t_start;
  else if (spec === 'end') t = p.t_end;
  else if (spec.startsWith('mark:')) {
    const m = p.marks.find((m) => m[1] === spec.slice(5));
    if (!m) throw new Error("no mark '" + spec.slice(5) + "' in process " + p.pid);
    t = m[0];
  } else {
    const m = /^(\d*)(?:\.(\d*))?(ns|us|ms|s|m|h|%|)$/.exec(spec);
    if (!m || (m[1] + (m[2] || '')) === '') throw new Error("malformed time '" + spec + "'");
    const dec = (m[2] || '').length, mant = BigInt(m[1] + (m[2] || '') || '0');
    const pow = 10n ** BigInt(dec);
    if (m[3] === '%')
      t = p.t_start + Number(BigInt(p.t_end - p.t_start) * mant / (100n * pow));
    else
      t = Number(mant * UNITS[m[3]] / pow);
  }
  if (t < p.t_start || t > p.t_end)
    throw new Error("time '" + spec + "' is outside the trace of process " + p.pid +
                    ' (' + fmtT(p.t_start) + '..' + fmtT(p.t_end) + ')');
  return t;
}

/* The index of the precomputed instant nearest t (the earlier of two as near). */
function nearest(points, t) {
  let lo = 0, hi = points.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (points[mid] < t) lo = mid + 1; else hi = mid;
  }
  return lo > 0 && t - points[lo - 1] <= points[lo] - t ? lo - 1 : lo;
}

/* ---- the selection's profile ------------------------------------------------ */

/* b - a, per stack and value; stacks all zero are left out. */
function difference(a, b) {
  const m = new Map();
  const add = (rows, sign) => {
    for (let i = 0; i < rows.length; i += ROW) {
      let v = m.get(rows[i]);
      if (!v) m.set(rows[i], v = [0, 0, 0, 0]);
      for (let k = 1; k < ROW; k++) v[k - 1] += sign * rows[i + k];
    }
  };
  add(b, 1);
  add(a, -1);
  const out = [];
  for (const [s, v] of m) if (v.some((x) => x !== 0)) out.push(s, ...v);
  return out;
}

function snapNote(asked, t) {
  return asked === t ? '' : 'asked for ' + fmtT(asked) + '; shown at the nearest precomputed ' +
    'instant, ' + fmtT(t) + '. ';
}

/* The profile of selection s of process p. */
function profileOf(p, s) {
  switch (s.kind) {
  case 'peak':
    return { rows: p.peak.rows, lacks: p.peak.lacks, t1: p.peak_t, t2: p.peak_t,
             title: 'Peak of the heap at ' + fmtT(p.peak_t), note: 'exact' };
  case 'leaks':
    return { rows: p.leaks.rows, lacks: p.leaks.lacks, t1: p.t_end, t2: p.t_end,
             title: 'Leaks: live at the end, ' + fmtT(p.t_end), note: 'exact' };
  case 'temporary':
    return { rows: p.temporary.rows, lacks: p.temporary.lacks, t1: p.t_start, t2: p.t_end,
             title: 'Temporary allocations of the whole run', note: 'exact' };
  case 'at': case 'rsspeak': {
    const i = nearest(p.points, s.asked1), t = p.points[i];
    const what = s.kind === 'rsspeak' ? 'Peak of RSS: snapshot at ' : 'Snapshot at ';
    return { rows: p.snaps[i].rows, lacks: p.snaps[i].lacks, t1: t, t2: t,
             title: what + fmtT(t), note: snapNote(s.asked1, t) || 'exact' };
  }
  case 'growth': {
    const i = nearest(p.points, s.asked1), j = nearest(p.points, s.asked2);
    const t1 = p.points[i], t2 = p.points[j];
    return { rows: difference(p.snaps[i].rows, p.snaps[j].rows), lacks: p.snaps[j].lacks,
             t1, t2, title: 'Growth from ' + fmtT(t1) + ' to ' + fmtT(t2),
             note: (snapNote(s.asked1, t1) + snapNote(s.asked2, t2)) ||
                   'exact (the difference of two precomputed snapshots)' };
  }
  default: {                   // steady: between two instants of the coarser grid
    const g = p.grid.map((i) => p.points[i]);
    let i = nearest(g, s.asked1), j = nearest(g, s.asked2);
    const t1 = g[i], t2 = g[j];
    const head = { t1, t2, title: 'Steady window from ' + fmtT(t1) + ' to ' + fmtT(t2) +
                   ': allocated in it, live at its end' };
    const note = (snapNote(s.asked1, t1) + snapNote(s.asked2, t2)).replace(/precomputed/g,
                 'precomputed steady-window') || 'exact';
    if (i >= j) return { ...head, rows: [], lacks: [], note: note + ' (an empty window)' };
    const n = g.length, k = i * (2 * n - i - 1) / 2 + (j - i - 1);
    return { ...head, rows: p.steady[k].rows, lacks: p.steady[k].lacks, note };
  }
  }
}

/* ---- the URL fragment ------------------------------------------------------ */

function fragmentOf(s) {
  const pid = proc.pid === D.default_pid ? '' : '&pid=' + proc.pid;
  if (s.kind === 'at') return 'at=' + s.t1 + 'ns' + pid;
  if (s.kind === 'growth' || s.kind === 'steady')
    return s.kind + '=' + s.t1 + 'ns..' + s.t2 + 'ns' + pid;
  return s.kind + pid;
}

/* A fragment's part with its %XX escapes undone; as it is when it has a
 * bare '%' ("at=50%", typed as trace-snap takes it). */
function decoded(part) {
  try {
    return decodeURIComponent(part);
  } catch (e) {
    return part;
  }
}

/* The selection a fragment asks for; throws, saying why, if it is bad. */
function selectionOf(frag) {
  const parts = frag.replace(/^#/, '').split('&');
  const pidPart = parts.find((x) => x.startsWith('pid='));
  const p = pidPart ? D.procs.find((q) => String(q.pid) === pidPart.slice(4)) : proc;
  if (!p) throw new Error('no process with ' + pidPart);
  const main = decoded(parts[0] || 'peak');
  const eq = main.indexOf('=');
  const kind = eq < 0 ? main : main.slice(0, eq), arg = eq < 0 ? '' : main.slice(eq + 1);
  if (['peak', 'leaks', 'temporary', 'rsspeak'].includes(kind) && eq < 0) {
    if (kind === 'rsspeak' && p.rss_peak_t === null) throw new Error('this run has no RSS samples');
    const t = kind === 'rsspeak' ? p.rss_peak_t : 0;
    return { p, s: { kind, asked1: t, asked2: t } };
  }
  if (kind === 'at') {
    const t = parseTime(p, arg);
    return { p, s: { kind, asked1: t, asked2: t } };
  }
  if (kind === 'growth' || kind === 'steady') {
    const dots = arg.indexOf('..');
    if (dots < 0) throw new Error("malformed window '" + arg + "' (expected T1..T2)");
    const t1 = parseTime(p, arg.slice(0, dots)), t2 = parseTime(p, arg.slice(dots + 2));
    if (t1 > t2) throw new Error("window '" + arg + "' ends before it starts");
    return { p, s: { kind, asked1: t1, asked2: t2 } };
  }
  throw new Error("unknown selection '" + main + "' (expected at=, growth=, steady=, peak, " +
                  'leaks, temporary or rsspeak)');
}

/* ---- drawing ---------------------------------------------------------------- */

function frameOf(f) {
  return { fn: D.frames[3 * f], file: D.files[D.frames[3 * f + 1]], line: D.frames[3 * f + 2] };
}

/* Stack s's functions, each once: worked out at its first use and kept,
 * since the table and the search walk them at every selection. */
const stackFnSets = [];
function fnsOf(s) {
  return stackFnSets[s] || (stackFnSets[s] = [...new Set(D.stacks[s].map((f) => D.frames[3 * f]))]);
}

/* The flame graph's tree: callers first (root to leaf) or allocators first
 * (leaf to root), nodes merged by function, values of the chosen pair. */
function tree(rows, view, colB, colN) {
  const root = { name: 'all', value: 0, objects: 0, children: [], kids: new Map(), key: '' };
  for (let i = 0; i < rows.length; i += ROW) {
    const b = rows[i + colB], n = rows[i + colN];
    if (b <= 0) continue;      // a flame graph has no negative widths: the table shows them
    const st = D.stacks[rows[i]], last = st.length - 1;
    let node = root;
    node.value += b;
    node.objects += n;
    for (let k = 0; k <= last; k++) {
      const f = st[view === 'callers' ? last - k : k], fn = D.frames[3 * f];
      let kid = node.kids.get(fn);
      if (!kid) {
        const fr = frameOf(f);
        kid = { name: D.fns[fn], value: 0, objects: 0, children: [], kids: new Map(),
                where: fr.file ? fr.file + (fr.line ? ':' + fr.line : '') : '', parent: node,
                key: node.key + '/' + fn };
        node.kids.set(fn, kid);
        node.children.push(kid);
      }
      kid.value += b;
      kid.objects += n;
      node = kid;
    }
  }
  return root;
}

/* ---- the flame graph of a selection ------------------------------------------ */

/* Drawn here, not by d3-flame-graph (which draws the comparison's): a
 * selection's graph reuses the SVG elements of the call paths drawn last
 * time, frames have an SVG label, no per-frame listeners or transitions;
 * d3-flame-graph spent most of a click on those (style, layout and paint
 * of its HTML labels, a timer per frame). Same layout: a frame's width is
 * its bytes, children left to right by name, frames of MIN_FRAME_PX or
 * less not drawn, a click zooms into a frame (its ancestors full width,
 * faded). */

const CELL_PX = 18;            // height of a frame
const LABEL_PX = 35;           // narrower frames show no name
const LABEL_PAD = 4;           // px between a frame's edge and its name
const CHAR_PX = 7.3;           // width of a character of the label's font, to cut names
const SEARCH_COLOR = '#E600E6';   // frames matching the search (d3-flame-graph's)
const HASH_CHARS = 7;          // characters of a name its colour depends on

let flame = null;              // {root, zoom, nodes: the frames drawn, by data-i}

/* A frame's colour: d3-flame-graph's warm palette, from its name. */
function frameColor(name) {
  let h = 0, most = 0, w = 1;
  for (let i = 0; i < name.length && i < HASH_CHARS; i++, w *= 0.7) {
    h += w * (name.charCodeAt(i) % 10);
    most += w * 9;
  }
  const v = most ? h / most : 0;
  return 'rgb(' + Math.round(200 + 55 * v) + ',' + Math.round(230 * (1 - v)) + ',' +
    Math.round(55 * v) + ')';
}

function labelOf(n) {
  return n.name + (n.where ? ' ' + n.where : '') + ': ' + bytes(n.value) + ', ' + n.objects +
    ' objects';
}

/* The frames to draw: [node, x, width, depth, faded] each; x and width in
 * px of a graph `width` wide, zoomed into node `zoom` (or the root). */
function flameFrames(root, zoom, width) {
  const out = [], top = zoom || root, kx = top.value ? width / top.value : 0;
  const up = [];                         // the zoomed frame's ancestors, full width
  for (let a = top.parent; a; a = a.parent) up.unshift(a);
  up.forEach((n, d) => out.push([n, 0, width, d, true]));
  const walk = (n, x, d) => {
    const w = n.value * kx;
    if (w <= MIN_FRAME_PX) return;
    out.push([n, x, w, d, false]);
    const kids = [...n.children].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const k of kids) {
      walk(k, x, d + 1);
      x += k.value * kx;
    }
  };
  walk(top, 0, up.length);
  return out;
}

const SVG_NS = 'http://www.w3.org/2000/svg';
let frameEls = new Map();      // a drawn frame's <g> by its call path, reused by the next drawing

/* Sets an attribute only if it changed (an unchanged one costs no style work). */
function setAttr(el, name, value) {
  if (el.getAttribute(name) !== value) el.setAttribute(name, value);
}

/* The <g> of the frame of call path key: the one drawn last time, or new. */
function frameEl(svg, key) {
  let g = frameEls.get(key);
  if (g) {
    frameEls.delete(key);
    return g;
  }
  g = svg.appendChild(document.createElementNS(SVG_NS, 'g'));
  g.appendChild(document.createElementNS(SVG_NS, 'rect')).setAttribute('height', CELL_PX);
  return g;
}

/* Draws flame's frames into #flame: the frames of the call paths drawn
 * last time are moved, not made again (most of a new selection's frames). */
function renderFlame() {
  const el = $('flame'), width = Math.max(el.clientWidth, 600), term = $('search').value;
  const inverted = $('view').value === 'allocators';
  const frames = flameFrames(flame.root, flame.zoom, width);
  const depth = frames.reduce((m, f) => Math.max(m, f[3]), 0), h = (depth + 3) * CELL_PX;
  let svg = el.querySelector('svg');
  if (!svg) {
    svg = el.appendChild(document.createElementNS(SVG_NS, 'svg'));
    svg.setAttribute('class', 'd3-flame-graph');
  }
  setAttr(svg, 'width', String(width));
  setAttr(svg, 'height', String(h));
  const drawn = new Map();
  frames.forEach(([n, x, w, d, faded], i) => {
    const g = frameEl(svg, n.key), rect = g.firstChild;
    drawn.set(n.key, g);
    setAttr(g, 'class', faded ? 'frame fade' : 'frame');
    setAttr(g, 'data-i', String(i));
    setAttr(g, 'transform', 'translate(' + x.toFixed(2) + ',' +
            (inverted ? d * CELL_PX : h - (d + 1) * CELL_PX) + ')');
    setAttr(rect, 'width', w.toFixed(2));
    setAttr(rect, 'fill', term && n.name.includes(term) ? SEARCH_COLOR : frameColor(n.name));
    const fit = Math.floor((w - 2 * LABEL_PAD) / CHAR_PX);
    const label = w < LABEL_PX ? '' : n.name.length > fit ?
      n.name.slice(0, Math.max(fit - 1, 0)) + '…' : n.name;
    let text = rect.nextSibling;
    if (text && text.localName === 'title') {       // its tooltip: of last time's figures
      text.remove();
      text = rect.nextSibling;
    }
    if (label && !text) {
      text = g.appendChild(document.createElementNS(SVG_NS, 'text'));
      text.setAttribute('x', LABEL_PAD);
      text.setAttribute('y', CELL_PX - 5);
    }
    if (label) {
      if (text.textContent !== label) text.textContent = label;
      if (text.nextSibling) text.nextSibling.remove();
    } else if (text) {
      text.remove();
    }
  });
  for (const g of frameEls.values()) g.remove();
  frameEls = drawn;
  flame.nodes = frames.map((f) => f[0]);
}

/* The node of the frame an event is on, or null. */
function frameAt(e) {
  const g = e.target.closest && e.target.closest('g.frame');
  return g && flame ? { g, n: flame.nodes[Number(g.dataset.i)] } : null;
}

/* Hovering a frame says what it is (and gives it its tooltip); a click
 * zooms into it. */
function listenFlame() {
  const el = $('flame');
  el.addEventListener('mouseover', (e) => {
    const f = frameAt(e);
    if (!f) return;
    const x = f.n, total = flame.root.value, pct = total ? (100 * x.value / total).toFixed(2) : '0';
    $('details').textContent = x.name + (x.where ? '  ' + x.where : '') + '  ' +
      bytes(x.value) + '  ' + x.objects + ' objects  ' + pct + ' %';
    if (!f.g.querySelector('title'))
      f.g.appendChild(document.createElementNS(SVG_NS, 'title'))
        .textContent = labelOf(x);
  });
  el.addEventListener('click', (e) => {
    const f = frameAt(e);
    if (!f) return;
    flame.zoom = f.n === flame.root ? null : f.n;
    renderFlame();
  });
}

function drawFlame() {
  const live = $('metric').value === 'live';
  flame = { root: tree(shown.rows, $('view').value, live ? COL.liveB : COL.allocB,
                       live ? COL.liveN : COL.allocN), zoom: null, nodes: [] };
  renderFlame();
  if ($('search').value) searchShare();
}

/* The share of the stacks that hold a function matching the search box. */
function searchShare() {
  const term = $('search').value;
  if (!term) { $('search-share').textContent = ''; return; }
  const live = $('metric').value === 'live', col = live ? COL.liveB : COL.allocB;
  let hit = 0, all = 0;
  for (let i = 0; i < shown.rows.length; i += ROW) {
    const b = shown.rows[i + col];
    all += b;
    if (fnsOf(shown.rows[i]).some((fn) => D.fns[fn].includes(term))) hit += b;
  }
  $('search-share').textContent = 'matching: ' + bytes(hit) +
    (all ? ', ' + (100 * hit / all).toFixed(2) + ' %' : '');
}

function search() {
  renderFlame();
  searchShare();
}

/* Self (leaf frame) and total (anywhere in the stack, once) per function;
 * functions with nothing of the chosen pair are left out. */
function functionTable(rows, colB, colN) {
  const m = new Map();
  const get = (fn) => {
    let r = m.get(fn);
    if (!r) m.set(fn, r = { name: D.fns[fn], self_b: 0, self_n: 0, total_b: 0, total_n: 0 });
    return r;
  };
  for (let i = 0; i < rows.length; i += ROW) {
    const b = rows[i + colB], n = rows[i + colN], st = D.stacks[rows[i]];
    if (!st.length) continue;
    const leaf = get(D.frames[3 * st[0]]);
    leaf.self_b += b;
    leaf.self_n += n;
    for (const fn of fnsOf(rows[i])) {
      const r = get(fn);
      r.total_b += b;
      r.total_n += n;
    }
  }
  return [...m.values()].filter((r) => r.self_b || r.self_n || r.total_b || r.total_n);
}

const TABLE_COLS = ['self_b', 'self_n', 'total_b', 'total_n'];

/* Sets an element's text only if it changed: an unchanged cell costs the
 * browser no style or layout work. */
function setText(el, text) {
  if (el.textContent !== text) el.textContent = text;
}

function drawTable() {
  const live = $('metric').value === 'live';
  const rows = functionTable(shown.rows, live ? COL.liveB : COL.allocB,
                             live ? COL.liveN : COL.allocN);
  rows.sort(sortCol === 'name' ? (a, b) => a.name.localeCompare(b.name)
                               : (a, b) => b[sortCol] - a[sortCol] || a.name.localeCompare(b.name));
  const body = document.querySelector('#functions tbody'), first = rows.slice(0, TABLE_ROWS);
  while (body.rows.length > first.length) body.deleteRow(-1);
  while (body.rows.length < first.length) {     // rows are kept: a selection only sets text
    const tr = body.insertRow();
    tr.insertCell().className = 'fn';
    for (let k = 0; k < TABLE_COLS.length; k++) tr.insertCell().className = 'num';
  }
  first.forEach((r, i) => {
    const cells = body.rows[i].cells;
    setText(cells[0], r.name);
    TABLE_COLS.forEach((c, k) => setText(cells[k + 1], String(r[c])));
  });
  for (const th of document.querySelectorAll('#functions th'))
    th.classList.toggle('sorted', th.dataset.col === sortCol);
  $('table-note').textContent = rows.length > TABLE_ROWS
    ? 'the first ' + TABLE_ROWS + ' of ' + rows.length + ' functions' : rows.length + ' functions';
}

function drawSelection() {
  shown = profileOf(proc, sel);
  sel.t1 = shown.t1;
  sel.t2 = shown.t2;
  let total = 0, objects = 0;
  for (let i = 0; i < shown.rows.length; i += ROW) {
    total += shown.rows[i + COL.liveB];
    objects += shown.rows[i + COL.liveN];
  }
  $('selection-title').textContent = shown.title;
  const el = $('selection-total');
  el.dataset.bytes = total;
  el.dataset.kind = sel.kind;
  el.dataset.t1 = shown.t1;
  el.dataset.t2 = shown.t2;
  el.textContent = 'Total: ' + bytes(total) + ', ' + objects + ' objects';
  $('selection-note').textContent = shown.note;
  const ul = $('selection-lacks');
  ul.textContent = '';
  for (const l of shown.lacks) ul.appendChild(document.createElement('li')).textContent = l;
  drawFlame();
  drawTable();
  if (plot) placeSelection(plot);
}

function select(s) {
  sel = s;
  drawSelection();
  history.replaceState(null, '', '#' + fragmentOf(sel));
}

/* The fragment's selection, or the peak with the error shown. */
function applyFragment() {
  try {
    const r = selectionOf(location.hash || '#peak');
    if (r.p !== proc) showProcess(r.p);
    sel = r.s;
    drawSelection();
  } catch (e) {
    sel = { kind: 'peak', asked1: 0, asked2: 0 };
    drawSelection();
    $('selection-note').textContent = 'URL fragment ' + location.hash + ': ' + e.message +
      '; showing the peak instead.';
  }
}

/* ---- the timeline -------------------------------------------------------- */

/* The kinds of memory other than heap the process holds at some
 * precomputed instant (the timeline's buckets count heap only). */
function otherKinds(p) {
  return p.kinds ? Object.keys(p.kinds).filter((k) => k !== 'heap' && p.kinds[k].some((v) => v))
                 : [];
}

/* uPlot's aligned columns: seconds, most live heap bytes per bucket, RSS,
 * then each other kind's live bytes at the precomputed instants. */
function series(p) {
  const kinds = otherKinds(p), byT = new Map();
  const at = (t) => {
    let r = byT.get(t);
    if (!r) byT.set(t, r = [t / NS_PER_S, null, null, ...kinds.map(() => null)]);
    return r;
  };
  for (let i = 0; i < p.timeline.length; i += 3) at(p.timeline[i])[1] = p.timeline[i + 2];
  for (let i = 0; i < p.rss.length; i += 2) at(p.rss[i])[2] = p.rss[i + 1];
  kinds.forEach((k, j) => p.points.forEach((t, i) => { at(t)[3 + j] = p.kinds[k][i]; }));
  const rows = [...byT.entries()].sort((a, b) => a[0] - b[0]).map((e) => e[1]);
  return rows[0].map((_, c) => rows.map((r) => r[c]));
}

/* Marks and the peak, drawn over the chart; the selection placed. */
function overlay(u) {
  const c = u.ctx, top = u.bbox.top, h = u.bbox.height;
  const x = (t) => u.valToPos(t / NS_PER_S, 'x', true);
  c.save();
  c.font = '11px sans-serif';
  c.fillStyle = c.strokeStyle = '#888';
  for (const [t, label] of proc.marks) {
    c.fillRect(x(t), top, 1, h);
    c.fillText(label.length > MARK_LABEL ? label.slice(0, MARK_LABEL - 1) + '…' : label,
               x(t) + 3, top + 12);
  }
  c.fillStyle = '#c00';
  c.beginPath();
  c.arc(x(proc.peak_t), u.valToPos(proc.peak_bytes, 'y', true), 4, 0, 2 * Math.PI);
  c.fill();
  c.restore();
  placeSelection(u);
}

/* The selection on the timeline: a box in uPlot's over layer, moved at
 * each selection instead of redrawing the whole chart (its axes, its
 * thousands of buckets). A line at an instant, a band over a window. */
function placeSelection(u) {
  let box = u.over.querySelector('.selection');
  if (!box) {
    box = u.over.appendChild(document.createElement('div'));
    box.className = 'selection';
  }
  const x = (t) => u.valToPos(t / NS_PER_S, 'x');
  const instant = sel && ['at', 'rsspeak', 'peak'].includes(sel.kind);
  box.hidden = !sel || sel.kind === 'leaks' || sel.kind === 'temporary';
  if (box.hidden) return;
  box.classList.toggle('instant', instant);
  box.style.left = (instant ? x(sel.t1) - 1 : x(sel.t1)) + 'px';
  box.style.width = (instant ? 2 : Math.max(x(sel.t2) - x(sel.t1), 1)) + 'px';
}

function windowKind() {
  return document.querySelector('input[name=window]:checked').value;
}

/* A click selects an instant, a drag a window (of the chosen kind). */
function listen(u) {
  let down = null;
  u.over.addEventListener('mousedown', (e) => { down = e.offsetX; });
  u.over.addEventListener('mouseup', (e) => {
    if (down === null) return;
    const a = Math.min(down, e.offsetX), b = Math.max(down, e.offsetX);
    down = null;
    const t = (px) => Math.min(Math.max(Math.round(u.posToVal(px, 'x') * NS_PER_S),
                                        proc.t_start), proc.t_end);
    u.setSelect({ left: 0, width: 0, top: 0, height: 0 }, false);
    if (b - a < CLICK_PX) select({ kind: 'at', asked1: t(a), asked2: t(a) });
    else select({ kind: windowKind(), asked1: t(a), asked2: t(b) });
  });
}

function drawTimeline() {
  const el = $('timeline');
  if (plot) plot.destroy();
  const hasRss = proc.rss.length > 0;
  const step = uPlot.paths.stepped({ align: 1 });
  plot = new uPlot({
    width: Math.max(el.clientWidth, 600), height: 260,
    cursor: { drag: { x: true, y: false, setScale: false } },
    scales: { x: { time: false } },
    axes: [{ label: 'seconds' }, { label: 'bytes', size: 80, values: (u, v) => v.map(human) }],
    series: [
      { label: 'time', value: (u, v) => v === null ? '' : v.toFixed(6) + ' s' },
      { label: 'live heap (most in each bucket)', stroke: '#d05a00', fill: 'rgba(208,90,0,0.12)',
        spanGaps: true, paths: step, value: (u, v) => v === null ? '' : human(v) },
      { label: 'RSS', stroke: '#2a6fdb', spanGaps: true, paths: step, show: hasRss,
        value: (u, v) => v === null ? '' : human(v) },
      ...otherKinds(proc).map((k, j) => ({
        label: k + ' (at the precomputed instants)', stroke: KIND_COLORS[j % KIND_COLORS.length],
        spanGaps: true, value: (u, v) => v === null ? '' : human(v) })),
    ],
    hooks: { draw: [overlay], ready: [listen] },
  }, series(proc), el);
}

/* ---- the run's facts and the process --------------------------------------- */

function facts(p) {
  const dl = document.createElement('dl');
  const add = (k, v, cls) => {
    dl.appendChild(document.createElement('dt')).textContent = k;
    const dd = dl.appendChild(document.createElement('dd'));
    dd.textContent = v;
    if (cls) dd.className = cls;
  };
  add('process', p.pid + (p.ppid ? ' (parent ' + p.ppid + ')' : ''));
  add('command line', p.cmdline || p.exe || '(unknown)');
  add('duration', fmtT(p.t_end - p.t_start) + ' (' + fmtT(p.t_start) + ' .. ' +
      fmtT(p.t_end) + ')');
  add('events', (p.allocs + p.frees) + ' (' + p.allocs + ' allocations, ' + p.frees + ' frees)');
  add('lost events', String(p.lost_events), p.lost_events ? 'lost' : '');
  add('sample period', p.sample_period ? 'one allocation every ' + p.sample_period +
      ' bytes on average (numbers are estimates)' : 'every allocation recorded');
  add('peak of the heap', bytes(p.peak_bytes) + ' at ' + fmtT(p.peak_t));
  const box = $('facts');
  box.textContent = '';
  box.appendChild(dl);
  const ul = box.appendChild(document.createElement('ul'));
  ul.className = 'warnings';
  for (const l of p.lacks) ul.appendChild(document.createElement('li')).textContent = l;
  $('b-rss').disabled = p.rss_peak_t === null;
  $('precision').textContent = 'Snapshots are precomputed at ' + p.points.length +
    ' instants (every 1 % of the run, each mark, the peak and the RSS peak): an instant ' +
    'between them is shown as the nearest one, and the page says so. Growth is exact ' +
    'between any two of them; steady windows between the ' + p.grid.length +
    ' instants of a coarser grid. Peak, leaks and temporary are exact.';
}

function showProcess(p) {
  proc = p;
  $('proc').value = String(p.pid);
  facts(p);
  drawTimeline();
}

function init() {
  $('db').textContent = D.db;
  const box = $('proc');
  for (const p of D.procs) {
    const o = box.appendChild(document.createElement('option'));
    o.value = String(p.pid);
    o.textContent = p.pid + ' ' + (p.exe || '');
  }
  $('proc-box').hidden = D.procs.length < 2;
  box.addEventListener('change', () => {
    showProcess(D.procs.find((p) => String(p.pid) === box.value));
    select({ kind: 'peak', asked1: 0, asked2: 0 });
  });
  const button = (id, kind) => $(id).addEventListener('click', () => {
    const t = kind === 'rsspeak' ? proc.rss_peak_t : 0;
    select({ kind, asked1: t, asked2: t });
  });
  button('b-peak', 'peak');
  button('b-rss', 'rsspeak');
  button('b-leaks', 'leaks');
  button('b-temporary', 'temporary');
  for (const r of document.querySelectorAll('input[name=window]'))
    r.addEventListener('change', () => {
      if (sel.kind === 'growth' || sel.kind === 'steady')
        select({ kind: windowKind(), asked1: sel.asked1, asked2: sel.asked2 });
    });
  $('view').addEventListener('change', drawFlame);
  $('metric').addEventListener('change', () => { drawFlame(); drawTable(); });
  $('search').addEventListener('input', search);
  $('reset-zoom').addEventListener('click', () => { flame.zoom = null; renderFlame(); });
  listenFlame();
  for (const th of document.querySelectorAll('#functions th'))
    th.addEventListener('click', () => { sortCol = th.dataset.col; drawTable(); });
  window.addEventListener('hashchange', applyFragment);
  showProcess(D.procs.find((p) => p.pid === D.default_pid) || D.procs[0]);
  applyFragment();
  document.body.dataset.readyMs = performance.now().toFixed(1);   // read by bench/
  document.body.dataset.ready = '1';
}

/* ---- comparing two runs (--base) -------------------------------------------- */

const DIFF_RGB = { grew: [200, 50, 30], shrank: [40, 86, 200] };
const DIFF_SAME = '#d8d8d8';   // a frame whose total did not change
const DIFF_MIN_SHADE = 0.25;   // the faintest change still shows its colour

function signed(b) { return (b > 0 ? '+' : '') + bytes(b); }

/* The tree d3-flame-graph draws: the new run's widths; a node with nothing
 * in the new run is left out (the base_only note counts them). */
function diffTree(t) {
  const nodes = t.map(([, name, baseB, baseN, newB, newN]) =>
    ({ name, value: newB, objects: newN, base: baseB, baseObjects: baseN, children: [] }));
  for (let i = 1; i < t.length; i++)
    if (nodes[i].value > 0) nodes[t[i][0]].children.push(nodes[i]);
  return nodes[0];
}

/* Red for growth, blue for shrinkage, as strong as the change is large. */
function diffColor(x, most) {
  const change = x.value - x.base;
  if (!change || !most) return DIFF_SAME;
  const [r, g, b] = DIFF_RGB[change > 0 ? 'grew' : 'shrank'];
  const a = DIFF_MIN_SHADE + (1 - DIFF_MIN_SHADE) * Math.abs(change) / most;
  const mix = (c) => Math.round(255 - a * (255 - c));
  return 'rgb(' + mix(r) + ',' + mix(g) + ',' + mix(b) + ')';
}

function diffText(x) {
  return x.name + '  base: ' + bytes(x.base) + ', ' + x.baseObjects + ' objects  new: ' +
    bytes(x.value) + ', ' + x.objects + ' objects  change: ' + signed(x.value - x.base);
}

function drawDiffFlame(d) {
  const root = diffTree(d.tree);
  let most = 0;
  for (const [, , baseB, , newB] of d.tree)
    if (newB > 0) most = Math.max(most, Math.abs(newB - baseB));
  const el = $('diff-flame');
  const chart = flamegraph()
    .width(Math.max(el.clientWidth, 600))
    .cellHeight(18)
    .transitionDuration(0)
    .minFrameSize(MIN_FRAME_PX)
    .sort(true)
    .setColorMapper((n) => n.highlight ? '#E600E6' : diffColor(n.data, most))
    .label((n) => diffText(n.data))
    .onHover((n) => { $('diff-details').textContent = diffText(n.data); });
  d3.select(el).datum(root).call(chart);
}

/* Per function: base, new, change (flat) and cum-change, as trace-snap
 * --base --format text; rows with nothing to show are left out as there. */
function drawDiffTable(d) {
  const rows = d.functions.filter(([, fb, fn, cb, cn]) => fb || fn || cb !== cn);
  const body = document.querySelector('#diff-functions tbody');
  for (const [name, fb, fn, cb, cn] of rows.slice(0, TABLE_ROWS)) {
    const tr = body.insertRow();
    const td = tr.insertCell();
    td.className = 'fn';
    td.textContent = name;
    for (const [v, sign] of [[fb, false], [fn, false], [fn - fb, true], [cn - cb, true]]) {
      const c = tr.insertCell();
      c.className = 'num';
      c.textContent = sign && v > 0 ? '+' + v : String(v);
    }
  }
  $('diff-table-note').textContent = rows.length > TABLE_ROWS
    ? 'the first ' + TABLE_ROWS + ' of ' + rows.length + ' functions, largest change first'
    : rows.length + ' functions, largest change first';
}

/* What was asked of one run, in its own instants. */
function question(r) {
  switch (r.question) {
  case 'at': return 'the live set at ' + fmtT(r.t2);
  case 'peak': return 'the live set at the peak, ' + fmtT(r.t2);
  case 'growth': return 'the growth from ' + fmtT(r.t1) + ' to ' + fmtT(r.t2);
  case 'steady': return 'the steady window (' + fmtT(r.t1) + ', ' + fmtT(r.t2) + ']';
  case 'leaks': return 'the leaks, live at the end (' + fmtT(r.t2) + ')';
  default: return 'the temporary allocations of the whole trace';
  }
}

function drawDiffRuns(d) {
  const body = document.querySelector('#diff-runs tbody');
  const row = (k, f) => {
    const tr = body.insertRow();
    tr.insertCell().textContent = k;
    for (const r of d.runs) tr.insertCell().textContent = f(r);
  };
  row('database', (r) => r.db);
  row('process', (r) => r.pid + (r.ppid ? ' (parent ' + r.ppid + ')' : ''));
  row('command line', (r) => r.cmdline || r.exe || '(unknown)');
  row('question', question);
  row('duration', (r) => fmtT(r.t_end - r.t_start));
  row('events', (r) => (r.allocs + r.frees) + ' (' + r.allocs + ' allocations, ' + r.frees +
      ' frees)');
  row('lost events', (r) => String(r.lost_events));
  row('sample period', (r) => r.sample_period ? 'one allocation every ' + r.sample_period +
      ' bytes on average (numbers are estimates)' : 'every allocation recorded');
  row('peak of the heap', (r) => bytes(r.peak_bytes) + ' at ' + fmtT(r.peak_t));
  const ul = $('diff-lacks');
  d.runs.forEach((r, i) => {
    const who = i ? 'new: ' : 'base: ', [stacks, sum] = r.shrank;
    if (stacks)
      ul.appendChild(document.createElement('li')).textContent = who + stacks + ' stack' +
        (stacks === 1 ? '' : 's') + ' that shrank by ' + bytes(sum) + ' in all not drawn (a ' +
        'width cannot be negative; the table counts them)';
    for (const l of r.lacks) ul.appendChild(document.createElement('li')).textContent = who + l;
  });
}

function initDiff() {
  const d = D.diff, [base, now] = d.total;
  for (const id of ['facts', 'timeline-box', 'selection', 'flame-box', 'table-box'])
    $(id).hidden = true;
  $('diff').hidden = false;
  $('db').textContent = d.runs[1].db + ' compared with ' + d.runs[0].db;
  $('diff-title').textContent = 'Comparing two runs: ' + question(d.runs[1]) + ' (new) and ' +
    question(d.runs[0]) + ' (base)';
  const el = $('diff-total');
  el.dataset.bytes = now - base;
  el.dataset.base = base;
  el.dataset.new = now;
  el.textContent = 'Change: ' + signed(now - base) + ', from ' + bytes(base) + ' in the base to ' +
    bytes(now) + ' in the new run';
  const [paths, lost] = d.base_only;
  $('diff-note').textContent = 'Exact; functions matched by function and file name, as ' +
    'trace-snap --base. ' + (paths ? paths + ' call path' + (paths === 1 ? '' : 's') +
    ' of the base with nothing in the new run (' + bytes(lost) + ' in the base) not drawn ' +
    '(the table shows them).' : '');
  drawDiffRuns(d);
  drawDiffFlame(d);
  drawDiffTable(d);
  document.body.dataset.ready = '1';
}

if (D.diff) initDiff();
else if (D.procs.length) init();
else $('facts').textContent = 'The database holds no process.';
