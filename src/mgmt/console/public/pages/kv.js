// KV pages: a key browser (SCAN with pattern and type filter, TTL, size), a viewer/editor per
// type, delete and TTL, and a command box. Every call is one Redis command (or a pipeline) sent
// to the kv REST API through the console's forwarding. Large values are read in pages
// (GETRANGE, LRANGE, HSCAN, SSCAN, ZRANGE, XREVRANGE), never whole.
import {
  html, useState, useEffect, api, kv, qs, go, Card, Tabs, Notice, Value, Action,
  useLoad, Loaded, useConfirm, fmtBytes, fmtNum, session,
} from '../lib.js';

const TYPES = ['string', 'hash', 'list', 'set', 'zset', 'stream', 'ReJSON-RL'];
/** svc's JSON documents (without a JSON module) are hashes with this one field (docs/readme/kv-json.md). */
const JSON_FIELD = '\u0000svcjson:1';
/** The type to show: `json` for a JSON document (RedisJSON's `ReJSON-RL` or svc's marked hash). */
const shownType = (type, marked) => (type === 'ReJSON-RL' || (type === 'hash' && marked === 1) ? 'json' : type);
const SCAN_COUNT = 100;
const PAGE = 50;
/** String values are read in slices of this many bytes. */
const SLICE = 64 * 1024;

/** Several commands in one round trip (`/pipeline`); each result or an Error. */
async function pipeline(commands) {
  const r = await api('POST', 'kv/pipeline', commands.map((c) => c.map(String)));
  return r.map((x) => (x.error ? new Error(x.error) : x.result));
}

const TTL_TEXT = (ms) => (ms === -1 ? 'no expiry' : ms < 0 ? '—' : ms < 60_000 ? `${Math.round(ms / 1000)} s` : ms < 3_600_000 ? `${Math.round(ms / 60_000)} min` : `${(ms / 3_600_000).toFixed(1)} h`);

function Browser({ route }) {
  const pattern = route.query.get('match') ?? '*';
  const type = route.query.get('type') ?? '';
  const [cursors, setCursors] = useState(['0']);
  const [draft, setDraft] = useState({ match: pattern, type });
  useEffect(() => { setCursors(['0']); setDraft({ match: pattern, type }); }, [pattern, type]);
  const cursor = cursors[cursors.length - 1];
  const page = useLoad(async () => {
    const args = ['SCAN', cursor, 'MATCH', pattern || '*', 'COUNT', SCAN_COUNT];
    if (type) args.push('TYPE', type);
    const [next, keys] = await kv(...args);
    const info = keys.length ? await pipeline(keys.flatMap((k) => [['TYPE', k], ['PTTL', k], ['MEMORY', 'USAGE', k], ['HEXISTS', k, JSON_FIELD]])) : [];
    return { next, rows: keys.map((k, i) => ({ key: k, type: shownType(info[i * 4], info[i * 4 + 3]), ttl: info[i * 4 + 1], size: info[i * 4 + 2] })) };
  }, [pattern, type, cursor]);
  return html`
    <${Card}><form class="filters" onSubmit=${(e) => { e.preventDefault(); go(`#/kv/keys${qs(draft)}`); }}>
      <label>Pattern<input name="match" value=${draft.match} onInput=${(e) => setDraft({ ...draft, match: e.target.value })} /></label>
      <label>Type<select name="type" value=${draft.type} onChange=${(e) => setDraft({ ...draft, type: e.target.value })}><option value="">any</option>${TYPES.map((t) => html`<option value=${t}>${t}</option>`)}</select></label>
      <button class="primary" type="submit" data-scan>Scan</button>
      <span class="muted small">SCAN ${SCAN_COUNT} at a time: a page may hold fewer keys than that.</span>
    </form><//>
    <${Card} title="Keys" flush>
      <${Loaded} state=${page}>${(d) => html`
        ${d.rows.length === 0 ? html`<div class="empty">No keys in this SCAN step${d.next !== '0' ? ' — try the next page' : ''}.</div>` : html`
        <table class="t" data-table="keys"><thead><tr><th>Key</th><th>Type</th><th>TTL</th><th class="num">Size</th></tr></thead>
          <tbody>${d.rows.map((r) => html`<tr class="click" data-key=${r.key} onClick=${() => go(`#/kv/key/${encodeURIComponent(r.key)}`)}>
            <td class="mono clip">${r.key}</td><td><span class="badge info">${r.type}</span></td><td class="small">${TTL_TEXT(r.ttl)}</td><td class="num">${r.size instanceof Error ? '—' : fmtBytes(r.size)}</td></tr>`)}</tbody></table>`}
        <div class="pager"><span class="muted small">SCAN step ${cursors.length}</span>
          <button class="small" disabled=${cursors.length < 2} onClick=${() => setCursors(cursors.slice(0, -1))}>← Back</button>
          <button class="small" disabled=${d.next === '0'} onClick=${() => setCursors([...cursors, d.next])} data-next>Next →</button></div>`}<//>
    <//>`;
}

/** Edit-in-place row action: a prompt-like dialog with one textarea. */
function EditDialog({ title, initial, onSave, onClose }) {
  const [v, setV] = useState(initial);
  const [error, setError] = useState();
  const save = async () => { try { await onSave(v); onClose(); } catch (e) { setError(e.message); } };
  return html`<div class="overlay"><div class="dialog" role="dialog" aria-label=${title}>
    <div class="head">${title}</div>
    <div class="body">${error && html`<${Notice} kind="error">${error}<//>`}<textarea rows="8" name="edit" value=${v} onInput=${(e) => setV(e.target.value)}></textarea></div>
    <div class="foot"><button onClick=${onClose}>Cancel</button><button class="primary" onClick=${save} data-save>Save</button></div>
  </div></div>`;
}

function StringView({ k, reload }) {
  const [offset, setOffset] = useState(0);
  const [edit, setEdit] = useState(false);
  const d = useLoad(async () => {
    const [len, part] = await pipeline([['STRLEN', k], ['GETRANGE', k, offset, offset + SLICE - 1]]);
    return { len, part };
  }, [k, offset]);
  return html`<${Loaded} state=${d}>${({ len, part }) => html`
    ${edit && html`<${EditDialog} title="Edit value" initial=${part} onClose=${() => setEdit(false)} onSave=${(v) => kv('SET', k, v, 'KEEPTTL').then(() => { d.reload(); reload(); })} />`}
    <${Card} title=${`Value (${fmtBytes(len)})`} actions=${len <= SLICE && html`<${Action} class="small" onClick=${() => setEdit(true)} data-edit>Edit<//>`}>
      <${Value} text=${part} />
      ${len > SLICE && html`<div class="pager"><span class="muted small">bytes ${fmtNum(offset)}–${fmtNum(Math.min(len, offset + SLICE))} of ${fmtNum(len)} (too large to edit here)</span>
        <button class="small" disabled=${offset === 0} onClick=${() => setOffset(Math.max(0, offset - SLICE))}>← Previous</button>
        <button class="small" disabled=${offset + SLICE >= len} onClick=${() => setOffset(offset + SLICE)}>Next →</button></div>`}
    <//>`}<//>`;
}

/** Hash, set: cursor-paged with HSCAN / SSCAN. */
function ScanView({ k, kind }) {
  const [cursors, setCursors] = useState(['0']);
  const [edit, setEdit] = useState(null);
  const [adding, setAdding] = useState(false);
  const cursor = cursors[cursors.length - 1];
  const d = useLoad(async () => {
    const [next, flat] = await kv(kind === 'hash' ? 'HSCAN' : 'SSCAN', k, cursor, 'COUNT', PAGE);
    const rows = kind === 'hash' ? Array.from({ length: flat.length / 2 }, (_, i) => [flat[2 * i], flat[2 * i + 1]]) : flat.map((m) => [m]);
    const size = await kv(kind === 'hash' ? 'HLEN' : 'SCARD', k);
    return { next, rows, size };
  }, [k, cursor]);
  const remove = (f) => kv(kind === 'hash' ? 'HDEL' : 'SREM', k, f).then(d.reload);
  return html`<${Loaded} state=${d}>${({ next, rows, size }) => html`
    ${edit && html`<${EditDialog} title=${`Edit field ${edit[0]}`} initial=${edit[1]} onClose=${() => setEdit(null)} onSave=${(v) => kv('HSET', k, edit[0], v).then(d.reload)} />`}
    ${adding && html`<${EditDialog} title=${kind === 'hash' ? 'Add field (first line: field, rest: value)' : 'Add member'} initial="" onClose=${() => setAdding(false)}
      onSave=${(v) => (kind === 'hash' ? kv('HSET', k, v.split('\n')[0], v.split('\n').slice(1).join('\n')) : kv('SADD', k, v)).then(d.reload)} />`}
    <${Card} title=${`${kind === 'hash' ? 'Fields' : 'Members'} (${fmtNum(size)})`} flush actions=${html`<${Action} class="small" onClick=${() => setAdding(true)} data-add>Add<//>`}>
      <table class="t" data-table="members"><thead><tr><th>${kind === 'hash' ? 'Field' : 'Member'}</th>${kind === 'hash' && html`<th>Value</th>`}<th></th></tr></thead>
        <tbody>${rows.map((r) => html`<tr data-field=${r[0]}><td class="mono clip">${r[0]}</td>${kind === 'hash' && html`<td class="mono clip">${r[1]}</td>`}
          <td class="right"><div class="row" style="justify-content:flex-end">${kind === 'hash' && html`<${Action} class="small" onClick=${() => setEdit(r)} data-edit>Edit<//>`}<${Action} class="small danger" onClick=${() => remove(r[0])} data-remove>Remove<//></div></td></tr>`)}</tbody></table>
      <div class="pager"><button class="small" disabled=${cursors.length < 2} onClick=${() => setCursors(cursors.slice(0, -1))}>← Back</button>
        <button class="small" disabled=${next === '0'} onClick=${() => setCursors([...cursors, next])}>Next →</button></div>
    <//>`}<//>`;
}

/** List, sorted set, stream: index-paged. */
function RangeView({ k, kind }) {
  const [start, setStart] = useState(0);
  const [edit, setEdit] = useState(null);
  const [adding, setAdding] = useState(false);
  const d = useLoad(async () => {
    if (kind === 'list') {
      const [len, items] = await pipeline([['LLEN', k], ['LRANGE', k, start, start + PAGE - 1]]);
      return { len, rows: items.map((v, i) => [String(start + i), v]) };
    }
    if (kind === 'zset') {
      const [len, flat] = await pipeline([['ZCARD', k], ['ZRANGE', k, start, start + PAGE - 1, 'WITHSCORES']]);
      return { len, rows: Array.from({ length: flat.length / 2 }, (_, i) => [flat[2 * i], flat[2 * i + 1]]) };
    }
    const [len, entries] = await pipeline([['XLEN', k], ['XREVRANGE', k, '+', '-', 'COUNT', start + PAGE]]);
    return { len, rows: entries.slice(start).map(([id, fields]) => [id, JSON.stringify(Object.fromEntries(Array.from({ length: fields.length / 2 }, (_, i) => [fields[2 * i], fields[2 * i + 1]])))]) };
  }, [k, start]);
  const heads = { list: ['Index', 'Value'], zset: ['Member', 'Score'], stream: ['Entry ID', 'Fields'] }[kind];
  const remove = (r) => (kind === 'list' ? kv('LSET', k, r[0], '__svc_console_deleted__').then(() => kv('LREM', k, 1, '__svc_console_deleted__')) : kind === 'zset' ? kv('ZREM', k, r[0]) : kv('XDEL', k, r[0])).then(d.reload);
  const save = (v) => (kind === 'list' ? kv('LSET', k, edit[0], v) : kv('ZADD', k, v, edit[0])).then(d.reload);
  const add = (v) => (kind === 'list' ? kv('RPUSH', k, v) : kind === 'zset' ? kv('ZADD', k, v.split('\n')[0], v.split('\n').slice(1).join('\n')) : kv('XADD', k, '*', ...v.split('\n').flatMap((l) => [l.split('=')[0], l.split('=').slice(1).join('=')]))).then(d.reload);
  return html`<${Loaded} state=${d}>${({ len, rows }) => html`
    ${edit && html`<${EditDialog} title=${kind === 'list' ? `Edit index ${edit[0]}` : `Score of ${edit[0]}`} initial=${edit[1]} onClose=${() => setEdit(null)} onSave=${save} />`}
    ${adding && html`<${EditDialog} title=${{ list: 'Append a value', zset: 'Add member (first line: score, rest: member)', stream: 'Add entry (one field=value per line)' }[kind]} initial="" onClose=${() => setAdding(false)} onSave=${add} />`}
    <${Card} title=${`${{ list: 'Items', zset: 'Members', stream: 'Entries (newest first)' }[kind]} (${fmtNum(len)})`} flush actions=${html`<${Action} class="small" onClick=${() => setAdding(true)} data-add>Add<//>`}>
      <table class="t" data-table="members"><thead><tr><th>${heads[0]}</th><th>${heads[1]}</th><th></th></tr></thead>
        <tbody>${rows.map((r) => html`<tr data-field=${r[0]}><td class="mono clip">${r[0]}</td><td class="mono clip">${r[1]}</td>
          <td class="right"><div class="row" style="justify-content:flex-end">${kind !== 'stream' && html`<${Action} class="small" onClick=${() => setEdit(r)} data-edit>Edit<//>`}<${Action} class="small danger" onClick=${() => remove(r)} data-remove>Remove<//></div></td></tr>`)}</tbody></table>
      <div class="pager"><span class="muted small">${fmtNum(start)}–${fmtNum(start + rows.length)} of ${fmtNum(len)}</span>
        <button class="small" disabled=${start === 0} onClick=${() => setStart(Math.max(0, start - PAGE))}>← Previous</button>
        <button class="small" disabled=${start + PAGE >= len} onClick=${() => setStart(start + PAGE)}>Next →</button></div>
    <//>`}<//>`;
}

function JsonView({ k }) {
  const [edit, setEdit] = useState(false);
  const d = useLoad(() => kv('JSON.GET', k, '$'), [k]);
  return html`<${Loaded} state=${d}>${(v) => {
    const doc = (() => { try { return JSON.stringify(JSON.parse(v)[0], null, 2); } catch { return v; } })();
    return html`${edit && html`<${EditDialog} title="Edit JSON document" initial=${doc} onClose=${() => setEdit(false)} onSave=${(t) => kv('JSON.SET', k, '$', JSON.stringify(JSON.parse(t))).then(d.reload)} />`}
      <${Card} title="JSON document" actions=${html`<${Action} class="small" onClick=${() => setEdit(true)} data-edit>Edit<//>`}><${Value} text=${doc} /><//>`;
  }}<//>`;
}

export function KeyPage({ route }) {
  const k = route.parts[2];
  const [dialog, confirm] = useConfirm();
  const [ttlEdit, setTtlEdit] = useState(false);
  const meta = useLoad(async () => {
    const [type, ttl, size, marked] = await pipeline([['TYPE', k], ['PTTL', k], ['MEMORY', 'USAGE', k], ['HEXISTS', k, JSON_FIELD]]);
    return { type: shownType(type, marked), ttl, size };
  }, [k]);
  return html`${dialog}<div class="row" style="margin-bottom:14px"><a href="#/kv/keys">← Keys</a></div>
    <${Loaded} state=${meta}>${(m) => m.type === 'none' ? html`<${Notice} kind="error">Key not found (deleted or expired).<//>` : html`
      ${ttlEdit && html`<${EditDialog} title="Set TTL in seconds (empty: no expiry)" initial=${m.ttl > 0 ? String(Math.round(m.ttl / 1000)) : ''} onClose=${() => setTtlEdit(false)}
        onSave=${(v) => (v.trim() ? kv('EXPIRE', k, v.trim()) : kv('PERSIST', k)).then(meta.reload)} />`}
      <${Card} title="Key" actions=${html`<${Action} class="small" onClick=${() => setTtlEdit(true)} data-ttl>Set TTL<//>
        <${Action} class="small danger" onClick=${() => confirm({ title: 'Delete key', danger: true, confirmLabel: 'Delete', children: html`Delete <code>${k}</code>?`, onConfirm: () => kv('DEL', k).then(() => go('#/kv/keys')) })} data-delete>Delete<//>`}>
        <dl class="kv"><dt>Key</dt><dd class="mono" data-key-name>${k}</dd><dt>Type</dt><dd><span class="badge info">${m.type}</span></dd>
          <dt>TTL</dt><dd data-ttl-text>${TTL_TEXT(m.ttl)}</dd><dt>Memory</dt><dd>${m.size instanceof Error ? '—' : fmtBytes(m.size)}</dd></dl>
      <//>
      ${m.type === 'string' ? html`<${StringView} k=${k} reload=${meta.reload} />`
        : m.type === 'hash' || m.type === 'set' ? html`<${ScanView} k=${k} kind=${m.type} />`
        : m.type === 'json' ? html`<${JsonView} k=${k} />`
        : html`<${RangeView} k=${k} kind=${m.type} />`}`}<//>`;
}

/** Splits a command line into arguments: whitespace-separated, "double" or 'single' quotes group. */
export function splitArgs(line) {
  const out = [];
  const re = /"((?:[^"\\]|\\.)*)"|'([^']*)'|(\S+)/g;
  let m;
  while ((m = re.exec(line))) out.push(m[1] !== undefined ? m[1].replace(/\\(.)/g, '$1') : m[2] ?? m[3]);
  return out;
}

function CommandBox() {
  const [line, setLine] = useState('');
  const [history, setHistory] = useState([]);
  const run = async (e) => {
    e.preventDefault();
    const args = splitArgs(line);
    if (!args.length) return;
    let entry;
    try { entry = { line, result: await kv(...args) }; } catch (err) { entry = { line, error: err.message }; }
    setHistory([entry, ...history].slice(0, 20));
    setLine('');
  };
  return html`<${Card} title="Command">
    ${session.readonly && html`<${Notice}>Read-only console: commands run with the read-only token (writes are refused).<//>`}
    <form class="row" onSubmit=${run}><input name="command" style="flex:1" class="mono" placeholder='e.g. HGETALL user:1   or   SET greeting "hello world"' value=${line} onInput=${(e) => setLine(e.target.value)} />
      <button class="primary" type="submit" data-run>Run</button></form>
    <div style="margin-top:12px" data-results>${history.map((h) => html`<div style="margin-bottom:10px"><div class="mono small muted">&gt; ${h.line}</div>
      ${h.error ? html`<${Notice} kind="error">${h.error}<//>` : html`<${Value} text=${JSON.stringify(h.result, null, 2)} />`}</div>`)}</div>
  <//>`;
}

export function KvPage({ route }) {
  const tab = route.parts[1] === 'command' ? 'command' : 'keys';
  return html`<${Tabs} items=${[['#/kv/keys', 'Keys'], ['#/kv/command', 'Command']]} active=${`#/kv/${tab}`} />
    ${tab === 'command' ? html`<${CommandBox} />` : html`<${Browser} route=${route} />`}`;
}

