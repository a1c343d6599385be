// Vector page: indexes and namespaces (count, dimension, metric, type), browse with `range`,
// fetch by id, query by id / vector / data (with an embedder) with a metadata filter and topK.
// Every call goes to the vector REST API of the chosen index through the console's forwarding.
// Index management (create, rename, new tokens, delete with a typed confirmation) goes to
// /console/api/vector-indexes (the management API's routes); hidden in a read-only console.
import { html, useState, useEffect, api, vector, qs, go, Card, Notice, Value, Stat, useLoad, useConfirm, Action, Loaded, fmtNum, fmtBytes, session } from '../lib.js';

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

const indexApi = (method, path, body) => api(method, `vector-indexes${path}`, body);

/** Tokens of an index just created or re-keyed (shown once, with the endpoint). */
function Tokens({ ix }) {
  return html`<div data-tokens><${Notice}>Index <b>${ix.name}</b>: endpoint <code>${ix.endpoint}</code><br />token <code data-token>${ix.token}</code><br />read-only token <code>${ix.read_only_token}</code><//></div>`;
}

/** The index list with create, rename, new tokens and delete (none of them in a read-only console). */
function ManageIndexes({ list, reload }) {
  const [dialog, confirm] = useConfirm();
  const [shown, setShown] = useState();
  const [f, setF] = useState({ name: '', type: 'DENSE', similarity_function: 'COSINE', dimension_count: '' });
  const [error, setError] = useState();
  const set = (k) => (e) => setF({ ...f, [k]: e.target.value });
  const create = async (e) => {
    e.preventDefault();
    setError(undefined);
    try {
      const body = { name: f.name, type: f.type, similarity_function: f.similarity_function };
      if (f.type !== 'SPARSE') body.dimension_count = Number(f.dimension_count);
      if (f.type !== 'DENSE') body.sparse_embedding_model = 'BM25';
      const ix = await indexApi('POST', '', body);
      setShown(ix);
      setF({ ...f, name: '' });
      reload();
    } catch (err) { setError(err.message); }
  };
  const rename = (ix) => {
    const box = { name: ix.name };
    confirm({ title: 'Rename index', confirmLabel: 'Rename', children: html`<label>New name for <b>${ix.name}</b> (its URL and tokens stay)<input name="new-name" value=${ix.name} onInput=${(e) => (box.name = e.target.value)} /></label>`,
      onConfirm: async () => { await indexApi('POST', `/${encodeURIComponent(ix.id)}/rename`, { name: box.name }); reload(); } });
  };
  const reset = (ix) => confirm({ title: 'Reset tokens', danger: true, confirmLabel: 'Reset tokens', children: html`New tokens for <b>${ix.name}</b>? The current ones are refused at once.`,
    onConfirm: async () => { setShown(await indexApi('POST', `/${encodeURIComponent(ix.id)}/reset-password`)); reload(); } });
  const remove = (ix) => {
    const box = { typed: '' };
    confirm({ title: 'Delete index', danger: true, confirmLabel: 'Delete for good', children: html`Delete <b>${ix.name}</b> and all its vectors? This cannot be undone. Type the index name to confirm.
        <input name="confirm-name" placeholder=${ix.name} onInput=${(e) => (box.typed = e.target.value)} />`,
      onConfirm: async () => {
        if (box.typed !== ix.name) throw new Error(`type ${ix.name} to confirm`);
        await indexApi('DELETE', `/${encodeURIComponent(ix.id)}`);
        setShown(undefined);
        reload();
        go('#/vector');
      } });
  };
  return html`<${Card} title="Indexes" flush>
    ${dialog}
    <table class="t" data-table="indexes"><thead><tr><th>Name</th><th>Type</th><th>Metric</th><th class="num">Dimension</th><th>Defined by</th><th></th></tr></thead>
      <tbody>${list.map((ix) => html`<tr data-index=${ix.name}><td class="mono"><a href=${`#/vector${qs({ index: ix.id })}`}>${ix.name}</a></td><td>${ix.type}</td><td>${ix.similarity_function}</td>
        <td class="num">${ix.dimension_count || '—'}</td><td class="small muted">${ix.origin === 'runtime' ? 'API' : ix.origin === 'env' ? 'SVC_VECTOR_*' : 'SVC_VECTOR_INDEXES'}</td>
        <td class="right">${ix.origin === 'runtime' && html`<${Action} class="small" data-rename onClick=${() => rename(ix)}>Rename<//> `}<${Action} class="small" data-reset onClick=${() => reset(ix)}>Reset tokens<//>${ix.origin === 'runtime' && html` <${Action} class="small danger" data-delete onClick=${() => remove(ix)}>Delete<//>`}</td></tr>`)}</tbody></table>
    ${!session.readonly && html`<form class="filters" style="padding:12px" onSubmit=${create} data-create>
      <label>Name<input name="name" value=${f.name} onInput=${set('name')} /></label>
      <label>Type<select name="type" value=${f.type} onChange=${set('type')}><option>DENSE</option><option>SPARSE</option><option>HYBRID</option></select></label>
      <label>Metric<select name="similarity_function" value=${f.similarity_function} onChange=${set('similarity_function')}><option>COSINE</option><option>EUCLIDEAN</option><option>DOT_PRODUCT</option></select></label>
      ${f.type !== 'SPARSE' && html`<label>Dimension<input name="dimension_count" type="number" min="1" style="width:100px" value=${f.dimension_count} onInput=${set('dimension_count')} /></label>`}
      <button class="primary" type="submit">Create index</button></form>`}
    ${error && html`<div style="padding:0 12px 12px"><${Notice} kind="error">${error}<//></div>`}
    ${shown && html`<div style="padding:0 12px 12px"><${Tokens} ix=${shown} /></div>`}
  <//>`;
}

export function VectorPage({ route }) {
  const managed = useLoad(() => indexApi('GET', ''), []);
  const list = managed.data ?? (session.vectorIndexes.length ? session.vectorIndexes : ['default']).map((i) => ({ id: i, name: i }));
  const index = route.query.get('index') ?? list[0]?.id ?? 'default';
  const ns = route.query.get('ns') ?? '';
  const info = useLoad(() => vector(index, 'GET', 'info'), [index]);
  return html`
    <div class="row" style="margin-bottom:14px">
      <span class="muted small">Index</span>
      ${list.map((i) => html`<a href=${`#/vector${qs({ index: i.id })}`} class=${`badge ${i.id === index ? 'accent' : ''}`} style="padding:4px 12px">${i.name}</a>`)}
    </div>
    ${managed.data && html`<div style="margin-bottom:18px"><${ManageIndexes} list=${managed.data} reload=${managed.reload} /></div>`}
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
