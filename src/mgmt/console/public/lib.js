// Shared pieces of the console: the API client (session cookie + CSRF header), formatting helpers
// and small components. Everything user data goes through text nodes (htm/Preact escape it);
// nothing here sets innerHTML.
import { h, render } from '/console/vendor/preact.mjs';
import { useEffect, useRef, useState, useCallback } from '/console/vendor/hooks.mjs';
import htm from '/console/vendor/htm.mjs';
import uPlot from '/console/vendor/uPlot.esm.js';

export const html = htm.bind(h);
export { h, render, useEffect, useRef, useState, useCallback };

// ---------------------------------------------------------------- session & API

export const session = { csrf: '', readonly: false, user: '', areas: [], vectorIndexes: [] };
let onSignedOut = () => {};
export function setSignedOutHandler(fn) { onSignedOut = fn; }

export class ApiError extends Error {
  constructor(status, message, body) { super(message); this.status = status; this.body = body; }
}

/**
 * One call to the console API (`/console/api/<path>`); JSON in and out; throws ApiError. Every
 * call carries the session's CSRF token, GETs included (the server asks for it on every call: a kv
 * command can be a GET path).
 */
export async function api(method, path, body, extraHeaders = {}) {
  const headers = { ...extraHeaders };
  if (session.csrf) headers['x-csrf-token'] = session.csrf;
  let payload;
  if (body !== undefined) {
    headers['content-type'] = 'application/json';
    payload = typeof body === 'string' ? body : JSON.stringify(body);
  }
  const res = await fetch(`/console/api/${path}`, { method, headers, body: payload, credentials: 'same-origin', cache: 'no-store' });
  const text = await res.text();
  let data = null;
  if (text) { try { data = JSON.parse(text); } catch { data = text; } }
  if (res.status === 401 && path !== 'login') onSignedOut();
  if (!res.ok) {
    const msg = data && typeof data === 'object' && typeof data.error === 'string' ? data.error : `HTTP ${res.status}`;
    throw new ApiError(res.status, msg, data);
  }
  return data;
}

/** Query string from an object, leaving out empty values. */
export function qs(params) {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null || v === '') continue;
    if (Array.isArray(v)) v.forEach((x) => u.append(k, x)); else u.set(k, String(v));
  }
  const s = u.toString();
  return s ? `?${s}` : '';
}

/** The queue's public API (`/v2/...`), through the console's forwarding. */
export const queue = (method, path, body, headers) => api(method, `queue/v2/${path}`, body, headers);

/** One Redis command through the kv REST API; resolves to `result`, throws ApiError on `{error}`. */
export async function kv(...command) {
  const r = await api('POST', 'kv/', command.map((x) => (typeof x === 'number' ? String(x) : x)));
  return r.result;
}

/** The vector REST API of index `index` (`default` = the root index). */
export const vector = (index, method, path, body) => api(method, `vector/${encodeURIComponent(index)}/${path}`, body).then((r) => (r && 'result' in r ? r.result : r));

// ---------------------------------------------------------------- routing

export function useRoute() {
  const [hash, setHash] = useState(location.hash || '#/overview');
  useEffect(() => {
    const on = () => setHash(location.hash || '#/overview');
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  const [path, query = ''] = hash.slice(1).split('?');
  return { parts: path.split('/').filter(Boolean).map(decodeURIComponent), query: new URLSearchParams(query) };
}

export function go(hash) { location.hash = hash; }

// ---------------------------------------------------------------- formatting

export function fmtTime(ms) {
  if (ms === undefined || ms === null || ms === 0) return '—';
  const d = new Date(Number(ms));
  if (Number.isNaN(d.getTime())) return '—';
  const p = (n, w = 2) => String(n).padStart(w, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

export function fmtAgo(ms) {
  if (!ms) return '—';
  const s = Math.round((Date.now() - Number(ms)) / 1000);
  const abs = Math.abs(s);
  const unit = abs < 60 ? `${abs}s` : abs < 3600 ? `${Math.round(abs / 60)}m` : abs < 86400 ? `${Math.round(abs / 3600)}h` : `${Math.round(abs / 86400)}d`;
  return s >= 0 ? `${unit} ago` : `in ${unit}`;
}

export function fmtNum(n, digits = 0) {
  if (n === undefined || n === null || Number.isNaN(n)) return '—';
  return Number(n).toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: 0 });
}

export function fmtBytes(n) {
  if (n === undefined || n === null) return '—';
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

/** A base64 string decoded as UTF-8 text (queue bodies are sent base64 in some answers). */
export function fromBase64(b64) {
  try {
    const bin = atob(b64);
    const bytes = Uint8Array.from(bin, (c) => c.charCodeAt(0));
    return new TextDecoder().decode(bytes);
  } catch { return b64; }
}

/** Pretty JSON when `text` is JSON, else the text as is. */
export function prettyText(text) {
  if (typeof text !== 'string') return JSON.stringify(text, null, 2);
  try {
    const v = JSON.parse(text);
    return typeof v === 'string' ? v : JSON.stringify(v, null, 2);
  } catch { return text; }
}

const STATE_TONE = {
  DELIVERED: 'ok', SUCCESS: 'ok', RUN_SUCCESS: 'ok', ok: 'ok', active: 'ok', STEP_SUCCESS: 'ok',
  ERROR: 'bad', FAILED: 'bad', RUN_FAILED: 'bad', down: 'bad', STEP_FAILED: 'bad', CALLBACK_FAIL: 'bad',
  RETRY: 'warn', CANCEL_REQUESTED: 'warn', CANCELLED: 'warn', RUN_CANCELED: 'warn', paused: 'warn', STEP_RETRY: 'warn',
  ACTIVE: 'info', IN_PROGRESS: 'info', RUN_STARTED: 'info', STEP_PROGRESS: 'info', CREATED: 'accent', DELAYED: 'accent',
};

export function Badge({ state, children }) {
  const label = children ?? state;
  return html`<span class=${`badge ${STATE_TONE[state] ?? ''}`}>${label}</span>`;
}

// ---------------------------------------------------------------- components

export function Card({ title, actions, children, flush }) {
  return html`<section class="card">
    ${title !== undefined && html`<div class="head"><h2>${title}</h2><div class="row">${actions}</div></div>`}
    <div class=${flush ? 'body flush' : 'body'}>${children}</div>
  </section>`;
}

export function Stat({ label, value, hint }) {
  return html`<div class="stat"><div class="label">${label}</div><div class="value">${value}</div>${hint && html`<div class="hint">${hint}</div>`}</div>`;
}

export function Notice({ kind = 'info', children }) {
  return html`<div class=${`notice ${kind}`} role=${kind === 'error' ? 'alert' : 'status'}>${children}</div>`;
}

/** Tabs: `items` = [[hash, label]], `active` = the active hash. */
export function Tabs({ items, active }) {
  return html`<nav class="tabs">${items.map(([href, label]) => html`<a href=${href} class=${href === active ? 'active' : ''}>${label}</a>`)}</nav>`;
}

/**
 * Loads data with `load()` whenever `deps` change; returns {data, error, loading, reload}. Data
 * loaded for other deps is never returned (a page never shows one key's value under another).
 */
export function useLoad(load, deps) {
  const key = JSON.stringify(deps);
  const [state, setState] = useState({ key: undefined, data: undefined, error: undefined, loading: true });
  const [n, setN] = useState(0);
  useEffect(() => {
    let live = true;
    setState((s) => ({ ...s, loading: true }));
    Promise.resolve().then(load).then(
      (data) => live && setState({ key, data, error: undefined, loading: false }),
      (error) => live && setState({ key, data: undefined, error, loading: false }),
    );
    return () => { live = false; };
  }, [key, n]);
  const current = state.key === key;
  return { data: current ? state.data : undefined, error: current ? state.error : undefined, loading: !current || state.loading, reload: () => setN((x) => x + 1) };
}

/** Error/empty/loading wrapper. */
export function Loaded({ state, children }) {
  if (state.error) return html`<${Notice} kind="error">${state.error.message}<//>`;
  if (state.data === undefined) return html`<div class="empty">Loading…</div>`;
  return children(state.data);
}

/** A confirmation dialog; `onConfirm` may be async; shows its error. */
export function Confirm({ title, children, confirmLabel = 'Confirm', danger, onConfirm, onClose }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState();
  const run = async () => {
    setBusy(true); setError(undefined);
    try { await onConfirm(); onClose(); } catch (e) { setError(e.message); setBusy(false); }
  };
  return html`<div class="overlay" onClick=${(e) => e.target === e.currentTarget && onClose()}>
    <div class="dialog" role="dialog" aria-label=${title}>
      <div class="head">${title}</div>
      <div class="body">${error && html`<${Notice} kind="error">${error}<//>`}${children}</div>
      <div class="foot">
        <button onClick=${onClose} disabled=${busy}>Cancel</button>
        <button class=${danger ? 'danger' : 'primary'} onClick=${run} disabled=${busy} data-confirm>${confirmLabel}</button>
      </div>
    </div>
  </div>`;
}

/** `[dialog, open]`: `open(props)` shows a Confirm with those props. */
export function useConfirm() {
  const [props, setProps] = useState(null);
  const dialog = props && html`<${Confirm} ...${props} onClose=${() => setProps(null)} />`;
  return [dialog, setProps];
}

/** An action button hidden in a read-only console. */
export function Action({ children, ...rest }) {
  if (session.readonly) return null;
  return html`<button ...${rest}>${children}</button>`;
}

/** A uPlot line chart: `series` = [{label, stroke}], `data` = [xs (s), ...ys]. */
export function Chart({ series, data, height = 160, bars }) {
  const ref = useRef();
  const plot = useRef();
  useEffect(() => {
    const el = ref.current;
    const width = Math.max(200, el.clientWidth);
    const opts = {
      width, height,
      legend: { show: true },
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(1, max * 1.15)] } },
      axes: [{ stroke: '#6b7385', grid: { stroke: '#eef0f4' } }, { stroke: '#6b7385', grid: { stroke: '#eef0f4' }, size: 50 }],
      series: [{}, ...series.map((s) => ({
        label: s.label, stroke: s.stroke, width: 1.6,
        fill: bars ? s.stroke + '99' : s.stroke + '18',
        ...(bars ? { paths: uPlot.paths.bars({ size: [0.8, 40] }), points: { show: false } } : { points: { show: false } }),
      }))],
    };
    plot.current = new uPlot(opts, data, el);
    const ro = new ResizeObserver(() => plot.current?.setSize({ width: Math.max(200, el.clientWidth), height }));
    ro.observe(el);
    return () => { ro.disconnect(); plot.current?.destroy(); plot.current = undefined; };
  }, [series.length, bars]);
  useEffect(() => { plot.current?.setData(data); }, [data]);
  return html`<div class="chart" ref=${ref}></div>`;
}

/** Text or JSON, always as text. */
export function Value({ text }) {
  return html`<pre class="value">${prettyText(text)}</pre>`;
}

/** Cursor pager: `cursors` is the stack of cursors of previous pages. */
export function Pager({ hasPrev, next, onPrev, onNext, info }) {
  return html`<div class="pager"><span class="muted small">${info}</span>
    <button class="small" disabled=${!hasPrev} onClick=${onPrev}>← Newer</button>
    <button class="small" disabled=${!next} onClick=${onNext} data-next>Older →</button></div>`;
}

/**
 * Cursor paging state: returns {cursor, page, prev(), next(c), reset()}. The current page's
 * cursor is sent with one request per page: never more than one page is asked for.
 */
export function useCursor(deps) {
  const [stack, setStack] = useState([]);
  useEffect(() => setStack([]), deps);
  return {
    cursor: stack[stack.length - 1],
    page: stack.length + 1,
    prev: () => setStack((s) => s.slice(0, -1)),
    next: (c) => setStack((s) => [...s, c]),
  };
}
