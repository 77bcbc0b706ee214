// kvtier live dashboard: polls ../status (JSON) and ../metrics (Prometheus text) of the process
// that serves it, keeps the last 10 minutes of samples in memory and redraws the page each time.
// No libraries, no build step; charts are inline SVG. Every figure taken from /status carries
// data-key (its JSON path, e.g. "l2.0.stored_bytes") and data-raw (the value it was rendered
// from), figures from /metrics carry data-metric and data-raw, so tests can check them.
'use strict';

const WINDOW_MS = 10 * 60 * 1000;
const MAX_SAMPLES = 2000;
const params = new URLSearchParams(location.search);
const INTERVAL_MS = Math.max(50, Number(params.get('interval_ms')) || 2000);
const TOKEN_KEY = 'kvtier.dashboard.token';
const COLORS = ['#2563eb', '#16a34a', '#d97706', '#9333ea', '#dc2626', '#0891b2'];
const OP_ORDER = ['write', 'load', 'lookup', 'remove'];
const KINDS = { server: 'cache server', master: 'store master', node: 'store node' };

const samples = [];   // {t, st, m: [{name, labels, key, value}], mi: Map key -> value}
let memToken = null;  // when sessionStorage is unavailable
let shown = new Set();  // the /status paths the page showed, for the Details section

// ---------------------------------------------------------------- token and fetching

function takeTokenFromFragment() {
  const m = /(?:^#|&)token=([^&]*)/.exec(location.hash);
  if (!m) return;
  const t = decodeURIComponent(m[1]);
  memToken = t || null;
  try {
    if (t) sessionStorage.setItem(TOKEN_KEY, t); else sessionStorage.removeItem(TOKEN_KEY);
  } catch (e) { /* private mode: memToken only */ }
  // Keep the secret out of the address bar, bookmarks and screenshots.
  history.replaceState(null, '', location.pathname + location.search);
}

const token = () => { try { return sessionStorage.getItem(TOKEN_KEY) || memToken; } catch (e) { return memToken; } };

class AuthError extends Error {}

async function get(url) {
  const t = token(), headers = t ? { Authorization: 'Bearer ' + t } : {};
  const r = await fetch(url, { headers, cache: 'no-store',
                               signal: AbortSignal.timeout(Math.max(5000, 3 * INTERVAL_MS)) });
  if (r.status === 401 || r.status === 403) throw new AuthError(`${url}: HTTP ${r.status}`);
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
  return r.text();
}

// JSON.parse that keeps integers beyond 2^53 (segment ids) exact, as their decimal text.
function parseJson(text) {
  return JSON.parse(text, (k, v, ctx) =>
    typeof v === 'number' && Number.isInteger(v) && !Number.isSafeInteger(v) && ctx &&
    typeof ctx.source === 'string' && /^-?\d+$/.test(ctx.source) ? ctx.source : v);
}

function parseMetrics(text) {
  const out = [];
  for (const line of text.split('\n')) {
    if (!line || line[0] === '#') continue;
    const m = /^([a-zA-Z_:][\w:]*)(\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = {};
    for (const l of (m[3] || '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) {
      labels[l[1]] = l[2].replace(/\\(.)/g, (_, c) => (c === 'n' ? '\n' : c));
    }
    const v = m[4] === '+Inf' ? Infinity : m[4] === '-Inf' ? -Infinity : Number(m[4]);
    out.push({ name: m[1], labels, key: m[1] + (m[2] || ''), value: v, text: m[4] });
  }
  return out;
}

// ---------------------------------------------------------------- sample access

const at = (obj, path) => path.split('.').reduce((o, p) => (o == null ? undefined : o[p]), obj);
const num = (v) => (typeof v === 'number' ? v : typeof v === 'string' && v !== '' ? Number(v) : NaN);
const last = () => samples[samples.length - 1];

function kindOf(st) {
  if (!st || typeof st !== 'object') return 'unknown';
  return 'l1_capacity_bytes' in st ? 'server' : 'segments' in st && 'counters' in st ? 'master'
    : 'dummies_connected' in st ? 'node' : 'unknown';
}

const matches = (e, match) => Object.entries(match).every(([k, v]) => e.labels[k] === v);

// Sum of the series of metric `name` whose labels include `match` (null: no such series).
function metric(s, name, match = {}) {
  let sum = null;
  for (const e of s.m) if (e.name === name && matches(e, match)) sum = (sum || 0) + e.value;
  return sum;
}

// Seconds between two samples: the server's own uptime where it has one, else browser time.
function seconds(a, b) {
  const ua = num(a.st.uptime_s), ub = num(b.st.uptime_s);
  return ub > ua ? ub - ua : (b.t - a.t) / 1000;
}

const valueSeries = (get) => samples.map((s) => [s.t, finite(get(s))]);
const steps = (f) => samples.slice(1).map((s, i) => [s.t, f(samples[i], s)]);

// Per-second rate of a counter between consecutive samples (null across a reset or a gap).
const rateSeries = (get) => steps((a, b) => {
  const x = finite(get(a)), y = finite(get(b)), dt = seconds(a, b);
  return x === null || y === null || y < x || dt <= 0 ? null : (y - x) / dt;
});

// Ratio of two counters' increments between consecutive samples (e.g. hits / lookups).
const ratioSeries = (getNum, getDen) => steps((a, b) => {
  const dn = getNum(b) - getNum(a), dd = getDen(b) - getDen(a);
  return dd > 0 && dn >= 0 ? dn / dd : null;
});

const finite = (v) => { const n = num(v); return Number.isFinite(n) ? n : null; };
const lastValue = (series) => (series.length ? series[series.length - 1][1] : null);

// Quantile q of the observations of a Prometheus histogram between samples a and b
// (histogram_quantile's linear interpolation inside the bucket), or null with none.
function quantile(a, b, name, match, q) {
  const buckets = new Map();
  for (const [s, sign] of [[b, 1], [a, -1]]) {
    if (!s) continue;
    for (const e of s.m) {
      if (e.name !== name + '_bucket' || !matches(e, match)) continue;
      const le = e.labels.le === '+Inf' ? Infinity : Number(e.labels.le);
      buckets.set(le, (buckets.get(le) || 0) + sign * e.value);
    }
  }
  const sorted = [...buckets.entries()].sort((x, y) => x[0] - y[0]);
  const total = sorted.length ? sorted[sorted.length - 1][1] : 0;
  if (!(total > 0)) return null;
  const rank = q * total;
  let prevLe = 0, prevCount = 0;
  for (const [le, count] of sorted) {
    if (count >= rank) {
      if (le === Infinity) return prevLe;
      return prevLe + (le - prevLe) * (count > prevCount ? (rank - prevCount) / (count - prevCount) : 1);
    }
    prevLe = le; prevCount = count;
  }
  return prevLe;
}

// p50/p99 over the last interval; when it saw no operation, over the window, else since start.
function latency(match) {
  const n = samples.length, name = 'kvtier_l2_latency_seconds';
  for (const [a, span] of [[samples[n - 2], ''], [samples[0], 'window'], [null, 'since start']]) {
    if (a === undefined || (a === samples[n - 1] && span !== 'since start')) continue;
    const p50 = quantile(a, samples[n - 1], name, match, 0.5);
    if (p50 !== null) return { p50, p99: quantile(a, samples[n - 1], name, match, 0.99), span };
  }
  return null;
}

// ---------------------------------------------------------------- formatting

const esc = (s) => String(s).replace(/[&<>"']/g, (c) =>
  ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
const rawText = (v) => (typeof v === 'string' ? v : JSON.stringify(v));
const NA = '<span class="na">—</span>';

function fmtNum(v) {
  const n = num(v);
  if (!Number.isFinite(n)) return v === undefined || v === null ? '—' : String(v);
  const a = Math.abs(n);
  if (a >= 1e4) {  // 12.3 k, 1.00 M, ... (3 significant digits)
    let e = Math.min(5, Math.floor(Math.log10(a) / 3)), x = n / 10 ** (3 * e);
    if (Math.abs(x) >= 999.5 && e < 5) { e++; x /= 1000; }
    return x.toPrecision(3) + ' ' + ' kMGTP'[e];
  }
  if (Number.isInteger(n)) return String(n);
  return a >= 100 ? n.toFixed(0) : a >= 1 ? n.toFixed(2).replace(/\.?0+$/, '') : n.toPrecision(2);
}

function fmtBytes(v) {
  const n = num(v);
  if (!Number.isFinite(n)) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let x = Math.abs(n), i = 0;
  while (x >= 1024 && i < units.length - 1) { x /= 1024; i++; }
  return (n < 0 ? '-' : '') + (i === 0 ? String(Math.round(x)) : x.toFixed(x >= 100 ? 0 : 1)) + ' ' + units[i];
}

const fmtRate = (v) => (v === null || v === undefined ? '—' : fmtNum(v) + '/s');
const fmtByteRate = (v) => (v === null || v === undefined ? '—' : fmtBytes(v) + '/s');
const fmtPct = (v) => { const n = num(v); return Number.isFinite(n) ? (100 * n).toFixed(1) + ' %' : '—'; };
const fmtBool = (v) => (v === true ? 'yes' : v === false ? 'no' : '—');

const fmtSecs = (s) => (s === null || !Number.isFinite(s) ? '—'
  : s < 1e-3 ? (s * 1e6).toFixed(s < 1e-4 ? 1 : 0) + ' µs'
  : s < 1 ? (s * 1e3).toFixed(s < 0.01 ? 2 : 1) + ' ms' : s.toFixed(2) + ' s');

function fmtDuration(s) {
  const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60), p = (x) => String(x).padStart(2, '0');
  return !Number.isFinite(s) || s < 0 ? '—' : s < 60 ? s.toFixed(0) + ' s' : d ? `${d}d ${h}h` : h ? `${h}h ${p(m)}m` : `${m}m ${p(Math.floor(s % 60))}s`;
}

const fmtClock = (t) => new Date(t).toLocaleTimeString([], { hour12: false });
const pctOf = (a, b) => (num(b) > 0 ? Math.min(100, Math.max(0, (100 * num(a)) / num(b))) : 0);

// ---------------------------------------------------------------- HTML pieces

// A figure from /status at `path`, shown as fmt(value); data-raw holds the value itself.
function fig(path, fmt = fmtNum, cls = '') {
  const v = at(last().st, path);
  if (v === undefined) return NA;
  shown.add(path);
  const text = typeof v === 'boolean' && fmt === fmtNum ? fmtBool(v) : fmt(v);
  return `<span class="fig ${cls}" data-key="${esc(path)}" data-raw="${esc(rawText(v))}" ` +
         `title="${esc(path)} = ${esc(rawText(v))}">${esc(text)}</span>`;
}

// A figure from /metrics: the series `key` (name{labels} as the endpoint writes it).
function mfig(e, fmt = fmtNum) {
  return `<span class="fig" data-metric="${esc(e.key)}" data-raw="${esc(e.text)}" ` +
         `title="${esc(e.key)} = ${esc(e.text)}">${esc(fmt(e.value))}</span>`;
}

const derived = (name, text) => `<span class="derived" data-derived="${esc(name)}">${esc(text)}</span>`;
const bar = (a, b) => `<div class="bar"><i style="width:${pctOf(a, b).toFixed(1)}%"></i></div>`;
const tile = (label, body, sub = '') =>
  `<div class="tile"><div class="lbl">${label}</div><div class="val">${body}</div><div class="sub">${sub}</div></div>`;
const section = (title, body, note = '') =>
  `<section><h2>${title}${note ? ` <small>${note}</small>` : ''}</h2>${body}</section>`;

function table(cols, rows, empty = 'none') {
  if (!rows.length) return `<p class="empty">${empty}</p>`;
  return `<table><thead><tr>${cols.map((c) => `<th>${c}</th>`).join('')}</tr></thead><tbody>` +
         rows.map((r) => `<tr>${r.map((c) => `<td>${c}</td>`).join('')}</tr>`).join('') + '</tbody></table>';
}

function niceCeil(v) {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

const spanLabel = (ms) => (ms < 90000 ? `−${Math.round(ms / 1000)}s` : `−${Math.round(ms / 60000)}m`);

// A time-series chart: series = [{name, pts: [[t, v|null]...]}]; opt: {fmt, max, min, ratio}.
function chart(title, series, opt = {}) {
  const W = 300, H = 92, L = 48, R = 6, T = 5, B = 15;
  const fmt = opt.fmt || fmtNum, axis = opt.axis || (opt.bytes ? axisBytes(opt.fmt === fmtByteRate) : fmt);
  const tEnd = last().t;
  const tStart = Math.min(tEnd - 1000, Math.max(samples[0].t, tEnd - WINDOW_MS));
  let yMax = opt.max ?? 0, yMin = opt.min ?? 0;
  if (opt.max === undefined) {
    for (const s of series) for (const [, v] of s.pts) if (v !== null && v > yMax) yMax = v;
    yMax = opt.bytes ? niceBytes(yMax) : niceCeil(yMax);
  }
  if (!(yMax > yMin)) yMax = yMin + 1;
  const x = (t) => L + ((t - tStart) / (tEnd - tStart)) * (W - L - R);
  const y = (v) => T + (1 - (v - yMin) / (yMax - yMin)) * (H - T - B);
  let svg = `<text class="ax" x="${L}" y="${H - 3}">${spanLabel(tEnd - tStart)}</text>` +
            `<text class="ax" x="${W - R}" y="${H - 3}" text-anchor="end">now</text>`;
  for (const frac of [0, 0.5, 1]) {
    const v = yMin + frac * (yMax - yMin), yy = y(v).toFixed(1);
    svg += `<line class="grid" x1="${L}" x2="${W - R}" y1="${yy}" y2="${yy}"/>` +
           `<text class="ax" x="${L - 4}" y="${(+yy + 3).toFixed(1)}" text-anchor="end">${esc(axis(v))}</text>`;
  }
  series.forEach((s, i) => {
    const color = s.color || COLORS[i % COLORS.length];
    let path = '', pen = false, dots = 0, max = null;
    for (const [t, v] of s.pts) {
      if (v === null || t < tStart) { pen = false; continue; }
      const vv = Math.min(Math.max(v, yMin), yMax);
      path += `${pen ? 'L' : 'M'}${x(t).toFixed(1)},${y(vv).toFixed(1)}`;
      pen = true; dots++; max = Math.max(max ?? v, v);
    }
    if (path) svg += `<path d="${path}" stroke="${color}" class="line${dots === 1 ? ' single' : ''}" data-series="${esc(s.name)}" data-max="${max}"/>`;
  });
  const legend = series.map((s, i) =>
    `<span class="lg"><i style="background:${s.color || COLORS[i % COLORS.length]}"></i>${esc(s.name)} ` +
    `<b>${esc(fmt(lastValue(s.pts)))}</b></span>`).join('');
  return `<div class="chart"><div class="ct"><span>${esc(title)}</span>${legend}</div>` +
         `<svg viewBox="0 0 ${W} ${H}" role="img" aria-label="${esc(title)}" data-chart="${esc(title)}">${svg}</svg></div>`;
}

// Short axis labels for bytes: "512 KiB", "1.5 GiB/s".
const axisBytes = (perSec) => (v) => fmtBytes(v).replace(/\.0 /, ' ') + (perSec ? '/s' : '');

const niceBytes = (v) => {
  const p = v > 0 ? Math.pow(1024, Math.floor(Math.log(v) / Math.log(1024))) : 1024;
  return niceCeil(v / p) * p;
};

// A small trend line for a table row.
function spark(pts, color = COLORS[0]) {
  const W = 90, H = 22, vals = pts.filter(([, v]) => v !== null);
  if (vals.length < 2) return '<svg class="spark" viewBox="0 0 90 22"></svg>';
  const t0 = pts[0][0], t1 = pts[pts.length - 1][0] || t0 + 1;
  const max = Math.max(...vals.map(([, v]) => v)) || 1;
  const d = vals.map(([t, v], i) => `${i ? 'L' : 'M'}${((W * (t - t0)) / (t1 - t0 || 1)).toFixed(1)},` +
                                   `${(H - 2 - ((H - 4) * v) / max).toFixed(1)}`).join('');
  return `<svg class="spark" viewBox="0 0 ${W} ${H}"><path d="${d}" stroke="${color}" class="line"/></svg>`;
}

// Every scalar of `obj` (at path prefix) that no other part of the page showed.
function details(obj, prefix = '', skip = []) {
  const items = [];
  for (const [k, v] of Object.entries(obj || {})) {
    const path = prefix + k;
    if (shown.has(path) || skip.includes(k) || (v !== null && typeof v === 'object')) continue;
    const fmt = /_bytes$/.test(k) ? fmtBytes : fmtNum;
    items.push(`<div class="kv"><span>${esc(k)}</span>${fig(path, fmt)}</div>`);
  }
  return items.length ? `<div class="kvs">${items.join('')}</div>` : '';
}

const detailsSection = (st, skip) => { const d = details(st, '', skip); return d ? section('Details', d) : ''; };

// ---------------------------------------------------------------- cache server

// The operations of the adapters: their object-valued fields with a `bytes` counter.
function opNames(adapters) {
  const names = new Set(), rank = (n) => (OP_ORDER.indexOf(n) + 1) || 99;
  for (const a of adapters) for (const [k, v] of Object.entries(a)) if (v && typeof v === 'object' && 'bytes' in v) names.add(k);
  return [...names].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
}

function renderServer(st) {
  const l2 = Array.isArray(st.l2) ? st.l2 : [];
  const hitL1 = ratioSeries((s) => num(s.st.lookup_hit_chunks_l1), (s) => num(s.st.lookup_chunks));
  const hitL2 = ratioSeries((s) => num(s.st.lookup_hit_chunks_l2), (s) => num(s.st.lookup_chunks));
  const hitAll = ratioSeries((s) => num(s.st.lookup_hit_chunks_l1) + num(s.st.lookup_hit_chunks_l2),
                             (s) => num(s.st.lookup_chunks));
  const evRate = rateSeries((s) => s.st.l1_evictions);
  const lookRate = rateSeries((s) => s.st.lookup_chunks);
  const storeBps = rateSeries((s) => metric(s, 'kvtier_store_bytes_total'));
  const retrBps = rateSeries((s) => metric(s, 'kvtier_retrieve_bytes_total'));
  const l2Load = rateSeries((s) => (s.st.l2 || []).reduce((a, x) => a + num(at(x, 'load.bytes') || 0), 0));

  const tiles = [
    tile('L1 used', fig('l1_used_bytes', fmtBytes),
         bar(st.l1_used_bytes, st.l1_capacity_bytes) +
         `of ${fig('l1_capacity_bytes', fmtBytes)} · ${fig('l1_objects')} objects`),
    tile('L1 evictions', fig('l1_evictions'),
         `${derived('l1_evictions/s', fmtRate(lastValue(evRate)))} · ${fig('l1_evicted_bytes', fmtBytes)}`),
    tile('Hit rate L1', fig('lookup_hit_rate_l1', fmtPct, 'big'),
         `now ${derived('hit_rate_l1/interval', fmtPct(lastValue(hitL1)))} · ${fig('lookup_hit_chunks_l1')} chunks`),
    tile('Hit rate L2', fig('lookup_hit_rate_l2', fmtPct, 'big'),
         `now ${derived('hit_rate_l2/interval', fmtPct(lastValue(hitL2)))} · ${fig('lookup_hit_chunks_l2')} chunks`),
    tile('Lookup chunks', fig('lookup_chunks'), derived('lookup_chunks/s', fmtRate(lastValue(lookRate)))),
    tile('Workers', fig('registered_workers'), `${fig('sessions')} sessions`),
    tile('L2 adapters', fig('l2_adapters'), `${derived('l2_up', String(l2.filter((a) => a.up).length))} up`),
  ].join('');

  const charts = [
    chart('L1 used', [{ name: 'used', pts: valueSeries((s) => s.st.l1_used_bytes) }],
          { fmt: fmtBytes, bytes: true, max: num(st.l1_capacity_bytes) || undefined }),
    chart('Hit rate per interval', [{ name: 'L1', pts: hitL1 }, { name: 'L2', pts: hitL2, color: COLORS[1] },
                                   { name: 'all', pts: hitAll, color: COLORS[2] }], { fmt: fmtPctShort, max: 1 }),
    chart('L1 evictions & lookups', [{ name: 'evict', pts: evRate, color: COLORS[4] },
                                     { name: 'lookup', pts: lookRate, color: COLORS[0] }], { fmt: fmtRate }),
    chart('Bytes moved', [{ name: 'store', pts: storeBps }, { name: 'retrieve', pts: retrBps, color: COLORS[1] },
                          { name: 'L2 load', pts: l2Load, color: COLORS[3] }], { fmt: fmtByteRate, bytes: true }),
  ].join('');

  const ops = opNames(l2);
  const adapterRows = l2.map((a, i) => {
    const p = `l2.${i}.`;
    const lat = latency({ adapter: String(a.name) });
    const opCells = ops.map((ln) => {
      if (!a[ln] || typeof a[ln] !== 'object') return NA;
      const bps = lastValue(rateSeries((s) => at(s.st, `${p}${ln}.bytes`)));
      const l = latency({ adapter: String(a.name), op: ln });
      return `${fig(`${p}${ln}.bytes`, () => fmtByteRate(bps), 'rate')}` +
             `<small title="tasks, failed tasks; p50/p99 of this operation">${fig(`${p}${ln}.tasks`)} tasks` +
             `${num(a[ln].failed_tasks) ? ` · <b class="bad">${fig(`${p}${ln}.failed_tasks`)} failed</b>` : ''}` +
             `${l ? ` · ${fmtSecs(l.p50)}/${fmtSecs(l.p99)}` : ''}</small>`;
    });
    const stored = !('stored_bytes' in a) ? NA : fig(p + 'stored_bytes', fmtBytes) + ('capacity_bytes' in a
      ? ` <small>of ${fig(p + 'capacity_bytes', fmtBytes)}</small>${bar(a.stored_bytes, a.capacity_bytes)}` : '');
    const trend = rateSeries((s) => ops.reduce((acc, ln) => acc + num(at(s.st, `${p}${ln}.bytes`) || 0), 0));
    return [
      `<b>${fig(p + 'name', String)}</b>`, fig(p + 'type', String),
      pill(fig(p + 'up'), a.up), pill(fig(p + 'writes_up'), a.writes_up),
      fig(p + 'inflight_bytes', fmtBytes), stored,
      'stored_objects' in a ? fig(p + 'stored_objects') : NA,
      'evictions' in a ? fig(p + 'evictions') : NA,
      ...opCells,
      lat ? `${derived(`l2.${i}.p50`, fmtSecs(lat.p50))} / ${derived(`l2.${i}.p99`, fmtSecs(lat.p99))}` +
            (lat.span ? ` <small title="no operation in the last interval">${lat.span}</small>` : '')
          : NA,
      spark(trend, COLORS[3]),
    ];
  });
  const adapters = table(['adapter', 'type', 'up', 'writes', 'in flight', 'stored', 'objects', 'evictions',
                          ...ops.map((l) => `${esc(l)}`), 'p50 / p99', 'trend'],
                         adapterRows, 'no L2 adapter configured');

  const workers = (Array.isArray(st.workers) ? st.workers : []).map((w, i) => {
    const p = `workers.${i}.`;
    return [fig(p + 'instance_id', String), fig(p + 'model', String), `${fig(p + 'rank')} / ${fig(p + 'world_size')}`,
            fig(p + 'memory', String), fig(p + 'owner_pid', String), fig(p + 'num_blocks'), fig(p + 'block_tokens'),
            fig(p + 'regions'), fig(p + 'buffer_bytes', fmtBytes)];
  });

  return `<div class="tiles">${tiles}</div><div class="charts">${charts}</div>` +
    section('L2 adapters', adapters, 'per operation: throughput over the last interval, tasks, p50/p99 latency') +
    section('Workers', table(['instance', 'model', 'rank / world', 'memory', 'owner pid', 'blocks',
                              'tokens / block', 'regions', 'buffer'], workers, 'no worker registered')) +
    detailsSection(st, ['uptime_s', 'version']);
}

const fmtPctShort = (v) => (v === null || v === undefined ? '—' : (100 * v).toFixed(0) + '%');
const pill = (html, ok) => `<span class="pill ${ok === true ? 'ok' : ok === false ? 'bad' : ''}">${html}</span>`;

// ---------------------------------------------------------------- store master

function renderMaster(st) {
  const c = (name) => (s) => at(s.st, 'counters.' + name);
  const sum = (...names) => (s) => names.reduce((a, n) => a + num(at(s.st, 'counters.' + n) || 0), 0);
  const putRate = rateSeries(sum('puts_ok', 'puts_exists', 'puts_no_space', 'puts_invalid'));
  const getRate = rateSeries(sum('gets_hit', 'gets_miss', 'gets_not_ready'));
  const remRate = rateSeries(sum('removes_ok', 'removes_forced', 'removes_refused'));
  const nodes = Array.isArray(st.nodes) ? st.nodes : [], segs = Array.isArray(st.segments) ? st.segments : [];

  const tiles = [
    tile('Allocated', fig('allocated_bytes', fmtBytes),
         bar(st.allocated_bytes, st.capacity_bytes) + `${derived('allocated%', pctOf(st.allocated_bytes, st.capacity_bytes).toFixed(1) + ' %')} ` +
         `of ${fig('capacity_bytes', fmtBytes)}`),
    tile('Keys', fig('keys'), `${fig('unfinished_puts')} unfinished puts`),
    tile('Nodes alive', fig('nodes_alive'), `${derived('segments', String(segs.length))} segments`),
    tile('Puts ok', fig('counters.puts_ok'), `${fig('counters.puts_exists')} exists · all ${derived('puts/s', fmtRate(lastValue(putRate)))}`),
    tile('Gets hit', fig('counters.gets_hit'), `${fig('counters.gets_miss')} miss · all ${derived('gets/s', fmtRate(lastValue(getRate)))}`),
    tile('Leases granted', fig('counters.leases_granted'), derived('leases/s', fmtRate(lastValue(rateSeries(c('leases_granted')))))),
    tile('Evictions', fig('counters.evictions'), fig('counters.evicted_bytes', fmtBytes)),
  ].join('');

  const charts = [
    chart('Allocated', [{ name: 'allocated', pts: valueSeries((s) => s.st.allocated_bytes) }],
          { fmt: fmtBytes, bytes: true, max: num(st.capacity_bytes) || undefined }),
    chart('Keys', [{ name: 'keys', pts: valueSeries((s) => s.st.keys) },
                   { name: 'unfinished', pts: valueSeries((s) => s.st.unfinished_puts), color: COLORS[2] }]),
    chart('Operations', [{ name: 'put', pts: putRate }, { name: 'get', pts: getRate, color: COLORS[1] },
                         { name: 'remove', pts: remRate, color: COLORS[4] }], { fmt: fmtRate }),
    chart('Leases & evictions', [{ name: 'leases', pts: rateSeries(c('leases_granted')), color: COLORS[3] },
                                 { name: 'evict', pts: rateSeries(c('evictions')), color: COLORS[4] }], { fmt: fmtRate }),
  ].join('');

  const nodeRows = nodes.map((n, i) => [`<span class="mono">${fig(`nodes.${i}.id`, String)}</span>`, fig(`nodes.${i}.endpoint`, String),
                                        fig(`nodes.${i}.last_seen_ms_ago`, (v) => `${v} ms`)]);
  const segRows = segs.map((s, i) => {
    const p = `segments.${i}.`;
    return [`<span class="mono">${fig(p + 'node', String)}</span><small>segment ${fig(p + 'id', String)}</small>`,
            fig(p + 'endpoint', String),
            `<span class="nw">${fig(p + 'used_bytes', fmtBytes)} <small>of ${fig(p + 'capacity_bytes', fmtBytes)}</small></span>` +
            `<span class="nw">${bar(s.used_bytes, s.capacity_bytes)}<small>${pctOf(s.used_bytes, s.capacity_bytes).toFixed(1)} %</small></span>`];
  });
  const counterItems = Object.keys(st.counters || {}).map((k) => {
    const r = lastValue(rateSeries(c(k)));
    return `<div class="kv"><span>${esc(k.replace(/_/g, ' '))}</span>${fig('counters.' + k, /bytes/.test(k) ? fmtBytes : fmtNum)}` +
           `<small>${esc(/bytes/.test(k) ? fmtByteRate(r) : fmtRate(r))}</small></div>`;
  }).join('');

  return `<div class="tiles">${tiles}</div><div class="charts">${charts}</div>` +
    `<div class="cols">` +
    section('Nodes', table(['node', 'endpoint', 'last seen'], nodeRows, 'no live node')) +
    section('Segments', table(['node / segment', 'endpoint', 'used'], segRows, 'no mounted segment')) +
    `</div>` +
    section('Counters', `<div class="kvs counters">${counterItems}</div>`, 'total and rate over the last interval') +
    detailsSection(st, ['version']);
}

// ---------------------------------------------------------------- store node

function renderNode(st, s) {
  const series = (name, label) => [...new Set(s.m.filter((e) => e.name === name).map((e) => e.labels[label]))]
    .map((op, i) => ({ name: op, color: COLORS[i % COLORS.length], pts: rateSeries((x) => metric(x, name, { [label]: op })) }));
  const tiles = [
    tile('Node', `<span class="mono">${fig('id', String)}</span>`, `endpoint ${fig('endpoint', String)}`),
    tile('Master', fig('master', String), pill(fig('mounted', (v) => (v ? 'mounted' : 'not mounted')), st.mounted)),
    tile('Segment', fig('segment_bytes', fmtBytes), ''),
    tile('Dummies connected', fig('dummies_connected', fmtNum, 'big'), ''),
  ].join('');
  const charts = [
    chart('Dummies connected', [{ name: 'connected', pts: valueSeries((x) => x.st.dummies_connected) }]),
    chart('Dummy bytes', series('kvtier_node_dummy_bytes_total', 'op'), { fmt: fmtByteRate, bytes: true }),
    chart('Keys', [{ name: 'put', pts: rateSeries((x) => metric(x, 'kvtier_node_put_keys_total', { result: 'ok' })) },
                   { name: 'get', pts: rateSeries((x) => metric(x, 'kvtier_node_get_keys_total', { result: 'ok' })), color: COLORS[1] }],
          { fmt: fmtRate }),
    chart('Data plane', series('kvtier_data_plane_served_bytes_total', 'direction'), { fmt: fmtByteRate, bytes: true }),
  ].join('');
  const groups = new Map();   // one row per metric, its series side by side
  for (const e of s.m.filter((x) => /^kvtier_(node|data_plane|transfer)_/.test(x.name))) {
    const isBytes = /bytes/.test(e.name), isCounter = /_total$/.test(e.name);
    const r = isCounter ? lastValue(rateSeries((x) => x.mi.get(e.key))) : null;
    const labels = Object.values(e.labels).join(',');
    const name = e.name.replace(/^kvtier_(node_)?/, '').replace(/_total$/, '').replace(/_/g, ' ');
    groups.set(name, (groups.get(name) || '') + `<span class="chip${e.value ? '' : ' zero'}">` +
      `${labels ? `<small>${esc(labels)}</small> ` : ''}${mfig(e, isBytes ? fmtBytes : fmtNum)}` +
      `${isCounter && r ? ` <small>${esc(isBytes ? fmtByteRate(r) : fmtRate(r))}</small>` : ''}</span>`);
  }
  const rows = [...groups].map(([name, chips]) => [`<span class="mname">${esc(name)}</span>`, chips]);
  return `<div class="tiles">${tiles}</div><div class="charts">${charts}</div>` +
    section('Node metrics', table(['metric', 'series (value, rate over the last interval)'], rows,
                                  'no kvtier_node_* metric in /metrics'), 'from /metrics') +
    detailsSection(st);
}

// ---------------------------------------------------------------- page

function render() {
  const s = last(), st = s.st, kind = kindOf(st);
  shown = new Set();
  document.body.dataset.kind = kind;
  document.title = `kvtier ${KINDS[kind] || ''} · ${location.host}`;
  byId('kind').textContent = KINDS[kind] || 'unknown process';
  byId('kind').className = 'kind ' + kind;
  byId('addr').textContent = location.host;
  const build = s.m.find((e) => e.name === 'kvtier_build_info');
  byId('version').innerHTML = st.version !== undefined ? `v${fig('version', String)}`
    : build && build.labels.version ? `v${esc(build.labels.version)}` : '';
  const start = metric(s, 'process_start_time_seconds');
  byId('uptime').innerHTML = st.uptime_s !== undefined ? `up ${fig('uptime_s', (v) => fmtDuration(num(v)))}`
    : start ? `up ${derived('uptime', fmtDuration(Date.now() / 1000 - start))}` : '';
  const body = kind === 'server' ? renderServer(st) : kind === 'master' ? renderMaster(st)
    : kind === 'node' ? renderNode(st, s)
    : section('Status', details(st) || '<p class="empty">unrecognised /status</p>');
  byId('content').innerHTML = body;
}

const byId = (id) => document.getElementById(id);

function showBanner(cls, html) {
  const b = byId('banner');
  b.hidden = !html; b.className = 'banner ' + (html ? cls : ''); b.innerHTML = html || '';
}

function setState(state) {
  document.body.dataset.state = state;
  byId('dot').className = 'dot ' + state;
  const n = samples.length;
  byId('refresh').textContent = n ? `${n} samples · every ${fmtInterval(INTERVAL_MS)} · ${fmtClock(last().t)}`
    : `every ${fmtInterval(INTERVAL_MS)}`;
}

const fmtInterval = (ms) => (ms >= 1000 ? `${(ms / 1000).toFixed(ms % 1000 ? 1 : 0)} s` : `${ms} ms`);
let taken = 0;  // samples taken since the page loaded (body data-samples)

async function refresh() {
  const [st, mt] = await Promise.allSettled([get('../status'), get('../metrics')]);
  const t = Date.now();
  if (st.status === 'rejected') {
    const err = st.reason;
    if (err instanceof AuthError) {
      const url = `${location.origin}${location.pathname}#token=SECRET`;
      showBanner('auth', token()
        ? `<b>The token was refused</b> (${esc(err.message)}). Reopen this page as <code>${esc(url)}</code> ` +
          `with SECRET the contents of the process's <code>--auth-token-file</code>.`
        : `<b>This process requires a token</b> (it runs with <code>--auth-token-file</code>, ${esc(err.message)}). ` +
          `Open <code>${esc(url)}</code>, with SECRET the contents of that file. The token stays in ` +
          `this tab (a URL fragment is never sent to the server or its logs).`);
      byId('kind').textContent = 'token required';
      if (!samples.length) byId('content').innerHTML = '<p class="hint">No figures without the token.</p>';
      setState('unauthorized');
    } else {
      showBanner('error', `<b>Cannot fetch /status</b>: ${esc(err.message || err)}. ` +
        (samples.length ? `Showing the values of ${fmtClock(last().t)}; ` : '') + 'retrying.');
      setState('error');
    }
    return;
  }
  let status;
  try { status = parseJson(st.value); } catch (e) {
    showBanner('error', `<b>/status is not JSON</b>: ${esc(e.message)}`);
    setState('error');
    return;
  }
  const m = mt.status === 'fulfilled' ? parseMetrics(mt.value) : [];
  if (samples.length && kindOf(last().st) !== kindOf(status)) samples.length = 0;  // another process
  samples.push({ t, st: status, m, mi: new Map(m.map((e) => [e.key, e.value])) });
  while (samples.length > MAX_SAMPLES || (samples.length > 1 && t - samples[0].t > WINDOW_MS)) samples.shift();
  taken++;
  render();
  showBanner(mt.status === 'rejected' ? 'warn' : '', mt.status === 'rejected'
    ? `<b>Cannot fetch /metrics</b>: ${esc(mt.reason.message || mt.reason)}; rates from /metrics are missing.` : '');
  document.body.dataset.samples = String(taken);
  document.body.dataset.statusTime = String(t);
  setState('ok');
}

async function loop() {
  try { await refresh(); } catch (e) {
    showBanner('error', `<b>Dashboard error</b>: ${esc(e && e.stack ? e.stack : e)}`);
    setState('error');
  }
  setTimeout(loop, INTERVAL_MS);
}

takeTokenFromFragment();
byId('addr').textContent = location.host;
window.addEventListener('hashchange', takeTokenFromFragment);
loop();
