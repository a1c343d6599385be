// Vector page: indexes and namespaces (count, dimension, metric, type), browse with `range`,
// fetch by id, query by id / vector / data (with an embedder) with a metadata filter and topK.
// Every call goes to the vector REST API of the chosen index through the console's forwarding.
import { html, useState, useEffect, vector, qs, go, Card, Notice, Value, Stat, useLoad, Loaded, fmtNum, fmtBytes, session } from '../lib.js';

const nsPath = (endpoint, ns) => (ns ? `${endpoint}/${encodeURIComponent(ns)}` : endpoint);
const short = (v) => (Array.isArray(v) ? `[${v.slice(0, 4).map((x) => Number(x).toFixed(3)).join(', ')}${v.length > 4 ? `, … (${v.length})` : ''}]` : '');

function Records({ rows, scores }) {
  if (!rows.length) return html`<div class="empty">No records.</div>`;
  return html`<table class="t" data-table=${scores ? 'results' : 'records'}><thead><tr><th>ID</th>${scores && html`<th class="num">Score</th>`}<th>Metadata</th><th>Data</th><th>Vector</th></tr></thead>
    <tbody>${rows.map((r) => html`<tr data-id=${r.id}><td class="mono">${r.id}</td>${scores && html`<td class="num mono" data-score>${Number(r.score).toFixed(4)}</td>`}
      <td class="mono small clip wide" title=${r.metadata ? JSON.stringify(r.metadata) : ''}>${r.metadata ? JSON.stringify(r.metadata) : ''}</td>
      <td class="small clip">${r.data ?? ''}</td><td class="mono small">${short(r.vector)}</td></tr>`)}</tbody></table>`;
}

function Browse({ index, ns }) {
  const [cursors, setCursors] = useState(['0']);
  const [prefix, setPrefix] = useState('');
  const [applied, setApplied] = useState('');
  useEffect(() => setCursors(['0']), [index, ns, applied]);
  const cursor = cursors[cursors.length - 1];
  const page = useLoad(() => vector(index, 'POST', nsPath('range', ns), { cursor, limit: 20, includeMetadata: true, includeData: true, includeVectors: true, ...(applied ? { prefix: applied } : {}) }), [index, ns, cursor, applied]);
  return html`<${Card} title="Browse" flush actions=${html`<form class="row" onSubmit=${(e) => { e.preventDefault(); setApplied(prefix); }}>
      <input name="prefix" placeholder="id prefix" value=${prefix} onInput=${(e) => setPrefix(e.target.value)} /><button class="small" type="submit">Filter</button></form>`}>
    <${Loaded} state=${page}>${(d) => html`<${Records} rows=${d.vectors} />
      <div class="pager"><span class="muted small">page ${cursors.length}</span>
        <button class="small" disabled=${cursors.length < 2} onClick=${() => setCursors(cursors.slice(0, -1))}>← Back</button>
        <button class="small" disabled=${!d.nextCursor} onClick=${() => setCursors([...cursors, d.nextCursor])}>Next →</button></div>`}<//>
  <//>`;
}

function Fetch({ index, ns }) {
  const [id, setId] = useState('');
  const [state, setState] = useState();
  const run = async (e) => {
    e.preventDefault();
    try { setState({ rows: (await vector(index, 'POST', nsPath('fetch', ns), { ids: [id], includeMetadata: true, includeData: true, includeVectors: true })) }); } catch (err) { setState({ error: err.message }); }
  };
  return html`<${Card} title="Fetch by ID">
    <form class="row" onSubmit=${run}><input name="fetch-id" placeholder="id" value=${id} onInput=${(e) => setId(e.target.value)} /><button type="submit" data-fetch>Fetch</button></form>
    ${state?.error && html`<div style="margin-top:10px"><${Notice} kind="error">${state.error}<//></div>`}
    ${state?.rows && html`<div style="margin-top:10px" data-fetched>${state.rows[0] ? html`<${Value} text=${JSON.stringify(state.rows[0], null, 2)} />` : html`<${Notice}>No record with this ID.<//>`}</div>`}
  <//>`;
}

function Query({ index, ns, info }) {
  const hasEmbedder = Boolean(info.denseIndex?.embeddingModel) || Boolean(info.sparseIndex?.embeddingModel);
  const [f, setF] = useState({ mode: 'id', id: '', vector: '', data: '', filter: '', topK: '10' });
  const [state, setState] = useState();
  const set = (k) => (e) => setF({ ...f, [k]: e.target.value });
  const run = async (e) => {
    e.preventDefault();
    setState({ busy: true });
    try {
      const common = { topK: Number(f.topK) || 10, includeMetadata: true, includeData: true, ...(f.filter.trim() ? { filter: f.filter.trim() } : {}) };
      let rows;
      if (f.mode === 'data') rows = await vector(index, 'POST', nsPath('query-data', ns), { data: f.data, ...common });
      else {
        let vec;
        if (f.mode === 'id') {
          const [rec] = await vector(index, 'POST', nsPath('fetch', ns), { ids: [f.id], includeVectors: true });
          if (!rec) throw new Error(`no record with id ${f.id}`);
          vec = rec.vector;
        } else {
          vec = JSON.parse(f.vector);
        }
        rows = await vector(index, 'POST', nsPath('query', ns), { vector: vec, ...common });
      }
      setState({ rows });
    } catch (err) { setState({ error: err.message }); }
  };
  return html`<${Card} title="Query">
    <form onSubmit=${run}>
      <div class="filters">
        <label>By<select name="mode" value=${f.mode} onChange=${set('mode')}><option value="id">a record's vector (ID)</option><option value="vector">a vector</option>${hasEmbedder && html`<option value="data">text (embedder)</option>`}</select></label>
        ${f.mode === 'id' && html`<label>ID<input name="query-id" value=${f.id} onInput=${set('id')} /></label>`}
        ${f.mode === 'vector' && html`<label>Vector (JSON array)<input name="query-vector" style="width:320px" value=${f.vector} onInput=${set('vector')} placeholder="[0.1, 0.2, 0.3]" /></label>`}
        ${f.mode === 'data' && html`<label>Text<input name="query-data" style="width:320px" value=${f.data} onInput=${set('data')} /></label>`}
        <label>Metadata filter<input name="filter" style="width:260px" value=${f.filter} onInput=${set('filter')} placeholder="genre = 'drama' AND year > 2000" /></label>
        <label>Top K<input name="topK" type="number" min="1" max="1000" style="width:80px" value=${f.topK} onInput=${set('topK')} /></label>
        <button class="primary" type="submit" data-query>Query</button>
      </div>
    </form>
    ${state?.error && html`<div style="margin-top:10px"><${Notice} kind="error">${state.error}<//></div>`}
    ${state?.rows && html`<div style="margin-top:12px" class="card"><${Records} rows=${state.rows} scores /></div>`}
  <//>`;
}

export function VectorPage({ route }) {
  const indexes = session.vectorIndexes.length ? session.vectorIndexes : ['default'];
  const index = route.query.get('index') ?? indexes[0];
  const ns = route.query.get('ns') ?? '';
  const info = useLoad(() => vector(index, 'GET', 'info'), [index]);
  return html`
    <div class="row" style="margin-bottom:14px">
      <span class="muted small">Index</span>
      ${indexes.map((i) => html`<a href=${`#/vector${qs({ index: i })}`} class=${`badge ${i === index ? 'accent' : ''}`} style="padding:4px 12px">${i}</a>`)}
    </div>
    <${Loaded} state=${info}>${(d) => html`
      <div class="grid cols-4" style="margin-bottom:18px">
        <${Stat} label="Vectors" value=${fmtNum(d.vectorCount)} hint=${d.pendingVectorCount ? `${fmtNum(d.pendingVectorCount)} pending` : 'all indexed'} />
        <${Stat} label="Dimension" value=${d.dimension || '—'} hint=${d.indexType} />
        <${Stat} label="Metric" value=${html`<span style="font-size:18px">${d.similarityFunction}</span>`} hint=${d.denseIndex?.embeddingModel ? `embedder: ${d.denseIndex.embeddingModel}` : 'no embedder'} />
        <${Stat} label="Index size" value=${fmtBytes(d.indexSize)} hint=${`${Object.keys(d.namespaces ?? {}).length} namespace(s)`} />
      </div>
      <${Card} title="Namespaces" flush>
        <table class="t" data-table="namespaces"><thead><tr><th>Namespace</th><th class="num">Vectors</th><th class="num">Pending</th><th></th></tr></thead>
          <tbody>${Object.entries(d.namespaces ?? {}).map(([name, n]) => html`<tr class=${`click ${name === ns ? 'selected' : ''}`} onClick=${() => go(`#/vector${qs({ index, ns: name })}`)}>
            <td class="mono">${name === '' ? html`<span class="muted">(default)</span>` : name}</td><td class="num">${fmtNum(n.vectorCount)}</td><td class="num">${fmtNum(n.pendingVectorCount)}</td>
            <td class="right">${name === ns ? html`<span class="badge accent">selected</span>` : ''}</td></tr>`)}</tbody></table>
      <//>
      <${Query} index=${index} ns=${ns} info=${d} />
      <div class="grid cols-2"><div><${Fetch} index=${index} ns=${ns} /></div><div></div></div>
      <${Browse} index=${index} ns=${ns} />`}<//>`;
}
