// Queue pages: logs (filters, histogram, cursor paging), message detail, DLQ (retry/delete, one
// and bulk), schedules, queues, URL groups, flow-control keys, signing keys. Every call goes to the
// queue's public API (/v2/...) through the console's forwarding.
import {
  html, useState, useEffect, queue, qs, go, Badge, Card, Tabs, Notice, Chart, Value, Pager, Action,
  useLoad, Loaded, useConfirm, useCursor, fmtTime, fmtAgo, fmtNum, fromBase64, session,
} from '../lib.js';

const TABS = [
  ['#/queue/logs', 'Logs'],
  ['#/queue/dlq', 'Dead-letter queue'],
  ['#/queue/schedules', 'Schedules'],
  ['#/queue/queues', 'Queues'],
  ['#/queue/url-groups', 'URL groups'],
  ['#/queue/flow-control', 'Flow control'],
  ['#/queue/keys', 'Signing keys'],
];
const STATES = ['CREATED', 'ACTIVE', 'IN_PROGRESS', 'RETRY', 'ERROR', 'DELIVERED', 'FAILED', 'CANCEL_REQUESTED', 'CANCELLED'];
const PAGE_SIZE = 25;

/** `datetime-local` value -> epoch ms (or ''). */
const toMs = (v) => (v ? String(new Date(v).getTime()) : '');

function Filters({ fields, value, onApply }) {
  const [draft, setDraft] = useState(value);
  useEffect(() => setDraft(value), [JSON.stringify(value)]);
  const set = (k) => (e) => setDraft({ ...draft, [k]: e.target.value });
  return html`<form class="filters" onSubmit=${(e) => { e.preventDefault(); onApply(draft); }}>
    ${fields.map(([k, label, kind]) => html`<label>${label}
      ${kind === 'state'
        ? html`<select name=${k} value=${draft[k] ?? ''} onChange=${set(k)}><option value="">any</option>${STATES.map((s) => html`<option value=${s}>${s}</option>`)}</select>`
        : html`<input name=${k} type=${kind === 'time' ? 'datetime-local' : 'text'} value=${draft[k] ?? ''} onInput=${set(k)} />`}
    </label>`)}
    <button class="primary" type="submit" data-apply>Apply</button>
    <button type="button" onClick=${() => onApply({})}>Clear</button>
  </form>`;
}

function filterQuery(f) {
  const q = { ...f };
  if (f.fromDate) q.fromDate = toMs(f.fromDate);
  if (f.toDate) q.toDate = toMs(f.toDate);
  return q;
}

const LOG_FILTERS = [['state', 'State', 'state'], ['url', 'URL'], ['messageId', 'Message ID'], ['label', 'Label'], ['queueName', 'Queue'], ['scheduleId', 'Schedule'], ['fromDate', 'From', 'time'], ['toDate', 'To', 'time']];

function Histogram({ filters }) {
  const h = useLoad(() => {
    const to = filters.toDate ? Number(toMs(filters.toDate)) : Date.now();
    const from = filters.fromDate ? Number(toMs(filters.fromDate)) : to - 3_600_000;
    return queue('GET', `stats/events${qs({ fromDate: from, toDate: to, buckets: 60 })}`);
  }, [filters.fromDate, filters.toDate]);
  return html`<${Card} title="Events over time" actions=${html`<span class="muted small">all events in the time range (default: the last hour)</span>`}>
    <${Loaded} state=${h}>${(d) => {
      const n = Math.max(0, ...Object.values(d.states).map((a) => a.length));
      const xs = Array.from({ length: n }, (_, i) => (d.fromDate + i * d.bucketMs) / 1000);
      const pick = (names) => xs.map((_, i) => names.reduce((a, s) => a + (d.states[s]?.[i] ?? 0), 0));
      const other = Object.keys(d.states).filter((s) => !['DELIVERED', 'ERROR', 'FAILED'].includes(s));
      return n === 0
        ? html`<div class="empty">No events in this time range.</div>`
        : html`<${Chart} bars height=${140} series=${[{ label: 'delivered', stroke: '#0f8a5f' }, { label: 'errors', stroke: '#c0262d' }, { label: 'other', stroke: '#4f46e5' }]}
            data=${[xs, pick(['DELIVERED']), pick(['ERROR', 'FAILED']), pick(other)]} />`;
    }}<//>
  <//>`;
}

function LogsTab({ route }) {
  const filters = Object.fromEntries(route.query);
  const key = route.query.toString();
  const pager = useCursor([key]);
  const logs = useLoad(() => queue('GET', `logs${qs({ ...filterQuery(filters), count: PAGE_SIZE, cursor: pager.cursor })}`), [key, pager.cursor]);
  // the histogram is asked for once the first page of logs is shown: the table never waits for it
  const [tableShown, setTableShown] = useState(false);
  useEffect(() => { if (logs.data) setTableShown(true); }, [logs.data]);
  return html`
    <${Card}><${Filters} fields=${LOG_FILTERS} value=${filters} onApply=${(f) => go(`#/queue/logs${qs(f)}`)} /><//>
    ${tableShown ? html`<${Histogram} filters=${filters} />` : html`<${Card} title="Events over time"><div class="empty">…</div><//>`}
    <${Card} title="Logs" flush>
      <${Loaded} state=${logs}>${(d) => html`
        ${d.logs.length === 0 ? html`<div class="empty">No events match.</div>` : html`
        <table class="t" data-table="logs">
          <thead><tr><th>Time</th><th>State</th><th>Message</th><th>Destination</th><th>Queue / label</th><th class="num">Status</th></tr></thead>
          <tbody>${d.logs.map((l) => html`<tr class="click" onClick=${() => go(`#/queue/message/${encodeURIComponent(l.messageId)}`)}>
            <td class="small">${fmtTime(l.time)}</td>
            <td><${Badge} state=${l.state} /></td>
            <td class="mono small">${l.messageId}</td>
            <td class="clip" title=${l.url ?? l.topicName}>${l.url ?? l.topicName}</td>
            <td class="small">${l.queueName ?? ''}${l.label ? html` <span class="badge">${l.label}</span>` : ''}</td>
            <td class="num">${l.responseStatus ?? ''}</td>
          </tr>`)}</tbody>
        </table>`}
        <${Pager} hasPrev=${pager.page > 1} next=${d.cursor} onPrev=${pager.prev} onNext=${() => pager.next(d.cursor)} info=${`page ${pager.page} · ${d.logs.length} events`} />`}<//>
    <//>`;
}

function headersText(h) {
  if (!h) return '';
  return Object.entries(h).map(([k, v]) => `${k}: ${Array.isArray(v) ? v.join(', ') : v}`).join('\n');
}

export function MessagePage({ route }) {
  const id = route.parts[2];
  const [dialog, confirm] = useConfirm();
  const data = useLoad(async () => {
    const { logs } = await queue('GET', `logs${qs({ messageId: id, count: 100, order: 'earliestFirst' })}`);
    const state = logs[logs.length - 1]?.state;
    // ask only what exists (a 404 would show as an error in the browser's console)
    const ended = ['DELIVERED', 'FAILED', 'CANCELLED'].includes(state);
    const pending = ended ? null : await queue('GET', `messages/${encodeURIComponent(id)}`).catch(() => null);
    const dlq = state === 'FAILED' ? (await queue('GET', `dlq${qs({ messageId: id })}`)).messages[0] : undefined;
    return { logs, pending, dlq };
  }, [id]);
  return html`${dialog}<${Loaded} state=${data}>${(d) => {
    const first = d.logs[0] ?? {};
    const last = d.logs[d.logs.length - 1] ?? {};
    const body = d.pending ? (d.pending.body ?? (d.pending.bodyBase64 ? fromBase64(d.pending.bodyBase64) : '')) : first.body ? fromBase64(first.body) : '';
    const attempts = d.logs.filter((l) => ['ERROR', 'DELIVERED', 'FAILED'].includes(l.state));
    return html`
      <div class="row" style="margin-bottom:14px"><a href="#/queue/logs">← Logs</a><span class="spacer"></span>
        ${d.pending && html`<${Action} class="danger" onClick=${() => confirm({ title: 'Cancel message', danger: true, confirmLabel: 'Cancel message', children: html`Cancel <code>${id}</code>? It will not be delivered.`, onConfirm: () => queue('DELETE', `messages/${encodeURIComponent(id)}`).then(data.reload) })}>Cancel message<//>`}
        ${d.dlq && html`<a href=${`#/queue/dlq${qs({ messageId: id })}`}>In the DLQ →</a>`}
      </div>
      <div class="grid cols-2">
        <${Card} title="Message">
          <dl class="kv">
            <dt>ID</dt><dd class="mono">${id}</dd>
            <dt>State</dt><dd>${last.state ? html`<${Badge} state=${last.state} />` : '—'}</dd>
            <dt>Destination</dt><dd>${first.url ?? first.topicName ?? d.pending?.url ?? '—'}</dd>
            <dt>Method</dt><dd>${first.method ?? d.pending?.method ?? '—'}</dd>
            <dt>Queue</dt><dd>${first.queueName ?? '—'}</dd>
            <dt>Schedule</dt><dd>${first.scheduleId ?? '—'}</dd>
            <dt>Label</dt><dd>${first.label ?? '—'}</dd>
            <dt>Max retries</dt><dd>${first.maxRetries ?? '—'}</dd>
            <dt>Created</dt><dd>${fmtTime(first.time)}</dd>
          </dl>
        <//>
        <${Card} title="Headers"><${Value} text=${headersText(first.header ?? d.pending?.header) || '(none)'} /><//>
      </div>
      <${Card} title="Body"><${Value} text=${body || '(empty)'} /><//>
      <${Card} title=${`Attempts (${attempts.length})`} flush>
        ${attempts.length === 0 ? html`<div class="empty">No delivery attempt yet.</div>` : html`<table class="t" data-table="attempts">
          <thead><tr><th>Time</th><th>Outcome</th><th class="num">Status</th><th>Error</th><th>Response body</th></tr></thead>
          <tbody>${attempts.map((a) => html`<tr>
            <td class="small">${fmtTime(a.time)}</td><td><${Badge} state=${a.state} /></td><td class="num">${a.responseStatus ?? ''}</td>
            <td class="clip small">${a.error ?? ''}</td><td class="clip mono small">${a.responseBody ? fromBase64(a.responseBody) : ''}</td></tr>`)}</tbody></table>`}
      <//>
      <${Card} title="Events" flush>
        <table class="t"><thead><tr><th>Time</th><th>State</th><th>Next delivery</th></tr></thead>
          <tbody>${d.logs.map((l) => html`<tr><td class="small">${fmtTime(l.time)}</td><td><${Badge} state=${l.state} /></td><td class="small">${l.nextDeliveryTime ? fmtTime(l.nextDeliveryTime) : ''}</td></tr>`)}</tbody></table>
      <//>`;
  }}<//>`;
}

const DLQ_FILTERS = [['url', 'URL'], ['messageId', 'Message ID'], ['label', 'Label'], ['queueName', 'Queue'], ['scheduleId', 'Schedule'], ['responseStatus', 'Status'], ['fromDate', 'From', 'time'], ['toDate', 'To', 'time']];

/** Runs a bulk DLQ call until no cursor is left (at most 100 rounds); returns the total. */
async function drain(call, count) {
  let total = 0;
  for (let i = 0; i < 100; i++) {
    const r = await call();
    total += count(r);
    if (!r.cursor || count(r) === 0) break;
  }
  return total;
}

function DlqTab({ route }) {
  const filters = Object.fromEntries(route.query);
  const key = route.query.toString();
  const pager = useCursor([key]);
  const [selected, setSelected] = useState(new Set());
  const [result, setResult] = useState();
  const [dialog, confirm] = useConfirm();
  const list = useLoad(() => queue('GET', `dlq${qs({ ...filterQuery(filters), count: PAGE_SIZE, cursor: pager.cursor })}`), [key, pager.cursor]);
  useEffect(() => setSelected(new Set()), [key, pager.cursor]);
  const toggle = (id) => { const s = new Set(selected); s.has(id) ? s.delete(id) : s.add(id); setSelected(s); };
  const done = (msg) => { setResult(msg); setSelected(new Set()); list.reload(); };
  const fq = qs(filterQuery(filters));
  const one = (kind, id) => kind === 'retry'
    ? queue('POST', `dlq/retry/${encodeURIComponent(id)}`).then((r) => done(`Retried: new message ${r.messageId}.`))
    : queue('DELETE', `dlq/${encodeURIComponent(id)}`).then(() => done(`Deleted ${id}.`));
  const bulkSelected = (kind) => kind === 'retry'
    ? queue('POST', 'dlq/retry', { dlqIds: [...selected] }).then((r) => done(`Retried ${r.responses.length} messages.`))
    : queue('DELETE', 'dlq', { dlqIds: [...selected] }).then((r) => done(`Deleted ${r.deleted} entries.`));
  const bulkFilter = (kind) => (kind === 'retry'
    ? drain(() => queue('POST', `dlq/retry${fq}`), (r) => r.responses.length).then((n) => done(`Retried ${n} messages matching the filter.`))
    : drain(() => queue('DELETE', `dlq${fq}`), (r) => r.deleted).then((n) => done(`Deleted ${n} entries matching the filter.`)));
  const ask = (kind, what, run) => confirm({
    title: `${kind === 'retry' ? 'Retry' : 'Delete'} ${what}`, danger: kind === 'delete', confirmLabel: kind === 'retry' ? 'Retry' : 'Delete',
    children: kind === 'retry' ? html`Each message is published again as a new message and leaves the DLQ.` : html`The entries are removed for good.`,
    onConfirm: run,
  });
  return html`${dialog}
    <${Card}><${Filters} fields=${DLQ_FILTERS} value=${filters} onApply=${(f) => go(`#/queue/dlq${qs(f)}`)} /><//>
    ${result && html`<${Notice} kind="ok">${result}<//>`}
    <${Card} title="Dead-letter queue" flush actions=${!session.readonly && html`
      <${Action} class="small" disabled=${!selected.size} onClick=${() => ask('retry', `${selected.size} selected`, () => bulkSelected('retry'))} data-bulk-retry>Retry selected<//>
      <${Action} class="small danger" disabled=${!selected.size} onClick=${() => ask('delete', `${selected.size} selected`, () => bulkSelected('delete'))}>Delete selected<//>
      <${Action} class="small" onClick=${() => ask('retry', 'every entry matching the filter', () => bulkFilter('retry'))} data-retry-filter>Retry all matching<//>
      <${Action} class="small danger" onClick=${() => ask('delete', 'every entry matching the filter', () => bulkFilter('delete'))} data-delete-filter>Delete all matching<//>`}>
      <${Loaded} state=${list}>${(d) => html`
        ${d.messages.length === 0 ? html`<div class="empty">The dead-letter queue is empty${key ? ' for this filter' : ''}.</div>` : html`
        <table class="t" data-table="dlq">
          <thead><tr>${!session.readonly && html`<th></th>`}<th>Failed at</th><th>Message</th><th>Destination</th><th class="num">Status</th><th>Response / error</th><th></th></tr></thead>
          <tbody>${d.messages.map((m) => html`<tr class=${selected.has(m.dlqId) ? 'selected' : ''} data-dlq=${m.dlqId}>
            ${!session.readonly && html`<td><input type="checkbox" checked=${selected.has(m.dlqId)} onChange=${() => toggle(m.dlqId)} /></td>`}
            <td class="small">${fmtTime(Number(m.dlqId.split('-')[0]) || m.createdAt)}</td>
            <td class="mono small"><a href=${`#/queue/message/${encodeURIComponent(m.messageId)}`}>${m.messageId}</a></td>
            <td class="clip" title=${m.url ?? m.topicName}>${m.url ?? m.topicName}</td>
            <td class="num">${m.responseStatus ? html`<${Badge} state="ERROR">${m.responseStatus}<//>` : ''}</td>
            <td class="clip wide mono small" title=${m.responseBody ?? m.error ?? ''}>${m.responseBody ?? m.error ?? ''}</td>
            <td class="right">${!session.readonly && html`<div class="row" style="justify-content:flex-end">
              <button class="small" onClick=${() => ask('retry', m.messageId, () => one('retry', m.dlqId))} data-retry>Retry</button>
              <button class="small danger" onClick=${() => ask('delete', m.messageId, () => one('delete', m.dlqId))} data-delete>Delete</button></div>`}</td>
          </tr>`)}</tbody>
        </table>`}
        <${Pager} hasPrev=${pager.page > 1} next=${d.cursor} onPrev=${pager.prev} onNext=${() => pager.next(d.cursor)} info=${`page ${pager.page}`} />`}<//>
    <//>`;
}

function NewSchedule({ onClose, onCreated }) {
  const [f, setF] = useState({ destination: '', cron: '*/5 * * * *', body: '', scheduleId: '', queueName: '' });
  const [dialog] = useState(true);
  const set = (k) => (e) => setF({ ...f, [k]: e.target.value });
  const [error, setError] = useState();
  const create = async () => {
    setError(undefined);
    try {
      const headers = { 'Upstash-Cron': f.cron };
      if (f.scheduleId) headers['Upstash-Schedule-Id'] = f.scheduleId;
      if (f.queueName) headers['Upstash-Queue-Name'] = f.queueName;
      await queue('POST', `schedules/${f.destination}`, f.body, headers);
      onCreated();
    } catch (e) { setError(e.message); }
  };
  return dialog && html`<div class="overlay"><div class="dialog" role="dialog" aria-label="New schedule">
    <div class="head">New schedule</div>
    <div class="body">${error && html`<${Notice} kind="error">${error}<//>`}
      <label>Destination (URL or URL group)<input name="destination" value=${f.destination} onInput=${set('destination')} placeholder="https://example.com/api/job" /></label>
      <label>Cron (UTC; CRON_TZ= prefix for a time zone)<input name="cron" value=${f.cron} onInput=${set('cron')} /></label>
      <label>Schedule ID (optional)<input name="scheduleId" value=${f.scheduleId} onInput=${set('scheduleId')} /></label>
      <label>Queue (optional)<input name="queueName" value=${f.queueName} onInput=${set('queueName')} /></label>
      <label>Body<textarea name="body" rows="4" value=${f.body} onInput=${set('body')}></textarea></label>
    </div>
    <div class="foot"><button onClick=${onClose}>Cancel</button><button class="primary" onClick=${create} data-create>Create</button></div>
  </div></div>`;
}

function SchedulesTab() {
  const list = useLoad(() => queue('GET', 'schedules'), []);
  const [dialog, confirm] = useConfirm();
  const [creating, setCreating] = useState(false);
  const act = (id, action) => queue(action === 'delete' ? 'DELETE' : 'POST', action === 'delete' ? `schedules/${encodeURIComponent(id)}` : `schedules/${encodeURIComponent(id)}/${action}`);
  const ask = (s, action) => confirm({
    title: `${action[0].toUpperCase()}${action.slice(1)} schedule`, danger: action === 'delete', confirmLabel: action[0].toUpperCase() + action.slice(1),
    children: html`${action} <code>${s.scheduleId}</code> (${s.cron} → ${s.destination})?`,
    onConfirm: () => act(s.scheduleId, action).then(list.reload),
  });
  return html`${dialog}${creating && html`<${NewSchedule} onClose=${() => setCreating(false)} onCreated=${() => { setCreating(false); list.reload(); }} />`}
    <${Card} title="Schedules" flush actions=${html`<${Action} class="primary small" onClick=${() => setCreating(true)} data-new-schedule>New schedule<//>`}>
      <${Loaded} state=${list}>${(items) => items.length === 0 ? html`<div class="empty">No schedules.</div>` : html`
        <table class="t" data-table="schedules">
          <thead><tr><th>Schedule</th><th>Cron</th><th>Destination</th><th>State</th><th>Next run</th><th>Last run</th><th>Last state</th><th></th></tr></thead>
          <tbody>${items.map((s) => html`<tr data-schedule=${s.scheduleId}>
            <td class="mono small">${s.scheduleId}</td><td class="mono small">${s.cron}</td><td class="clip" title=${s.destination}>${s.destination}</td>
            <td>${s.isPaused ? html`<${Badge} state="paused">paused<//>` : html`<${Badge} state="active">active<//>`}</td>
            <td class="small">${s.isPaused ? '—' : html`${fmtTime(s.nextScheduleTime)} <span class="muted">(${fmtAgo(s.nextScheduleTime)})</span>`}</td>
            <td class="small">${fmtTime(s.lastScheduleTime)}</td>
            <td>${s.lastScheduleStates ? Object.values(s.lastScheduleStates).map((st) => html`<${Badge} state=${st} /> `) : '—'}</td>
            <td class="right"><div class="row" style="justify-content:flex-end">
              ${s.isPaused ? html`<${Action} class="small" onClick=${() => ask(s, 'resume')} data-resume>Resume<//>` : html`<${Action} class="small" onClick=${() => ask(s, 'pause')} data-pause>Pause<//>`}
              <${Action} class="small danger" onClick=${() => ask(s, 'delete')} data-delete>Delete<//></div></td>
          </tr>`)}</tbody></table>`}<//>
    <//>`;
}

function QueuesTab() {
  const list = useLoad(() => queue('GET', 'queues'), []);
  const [dialog, confirm] = useConfirm();
  const ask = (q, action) => confirm({
    title: `${action[0].toUpperCase()}${action.slice(1)} queue ${q.name}`, danger: action === 'delete', confirmLabel: action[0].toUpperCase() + action.slice(1),
    children: action === 'delete' ? html`Deletes the queue and cancels its waiting messages.` : html`${action} <code>${q.name}</code>?`,
    onConfirm: () => queue(action === 'delete' ? 'DELETE' : 'POST', action === 'delete' ? `queues/${encodeURIComponent(q.name)}` : `queues/${encodeURIComponent(q.name)}/${action}`).then(list.reload),
  });
  return html`${dialog}<${Card} title="Queues" flush>
    <${Loaded} state=${list}>${(items) => items.length === 0 ? html`<div class="empty">No queues. Queues are created by enqueueing (<code>POST /v2/enqueue/…</code>) or <code>POST /v2/queues</code>.</div>` : html`
      <table class="t" data-table="queues"><thead><tr><th>Queue</th><th class="num">Parallelism</th><th>State</th><th class="num">Lag</th><th>Created</th><th></th></tr></thead>
      <tbody>${items.map((q) => html`<tr data-queue=${q.name}><td class="mono">${q.name}</td><td class="num">${q.parallelism}</td>
        <td>${q.paused ? html`<${Badge} state="paused">paused<//>` : html`<${Badge} state="active">active<//>`}</td><td class="num">${fmtNum(q.lag)}</td><td class="small">${fmtTime(q.createdAt)}</td>
        <td class="right"><div class="row" style="justify-content:flex-end">
          ${q.paused ? html`<${Action} class="small" onClick=${() => ask(q, 'resume')}>Resume<//>` : html`<${Action} class="small" onClick=${() => ask(q, 'pause')}>Pause<//>`}
          <${Action} class="small danger" onClick=${() => ask(q, 'delete')}>Delete<//></div></td></tr>`)}</tbody></table>`}<//>
  <//>`;
}

function UrlGroupsTab() {
  const list = useLoad(() => queue('GET', 'topics'), []);
  const [dialog, confirm] = useConfirm();
  return html`${dialog}<${Card} title="URL groups" flush>
    <${Loaded} state=${list}>${(items) => items.length === 0 ? html`<div class="empty">No URL groups.</div>` : html`
      <table class="t" data-table="url-groups"><thead><tr><th>Group</th><th>Endpoints</th><th>Updated</th><th></th></tr></thead>
      <tbody>${items.map((g) => html`<tr><td class="mono">${g.name}</td>
        <td>${g.endpoints.map((e) => html`<div class="small">${e.name ? html`<span class="badge">${e.name}</span> ` : ''}${e.url}</div>`)}</td>
        <td class="small">${fmtTime(g.updatedAt)}</td>
        <td class="right"><${Action} class="small danger" onClick=${() => confirm({ title: `Delete URL group ${g.name}`, danger: true, confirmLabel: 'Delete', children: html`Messages published to <code>${g.name}</code> will be refused.`, onConfirm: () => queue('DELETE', `topics/${encodeURIComponent(g.name)}`).then(list.reload) })}>Delete<//></td></tr>`)}</tbody></table>`}<//>
  <//>`;
}

function FlowControlTab() {
  const list = useLoad(() => Promise.all([queue('GET', 'flowControl'), queue('GET', 'globalParallelism')]), []);
  return html`<${Loaded} state=${list}>${([keys, global]) => html`
    <div class="grid cols-4" style="margin-bottom:18px"><div class="stat"><div class="label">Deliveries running</div><div class="value">${fmtNum(global.parallelismCount)}</div><div class="hint">of at most ${fmtNum(global.parallelismMax)} at once</div></div></div>
    <${Card} title="Flow-control keys" flush>
      ${keys.length === 0 ? html`<div class="empty">No flow-control keys.</div>` : html`<table class="t" data-table="flow-control">
        <thead><tr><th>Key</th><th class="num">Waiting</th><th class="num">Parallelism</th><th class="num">Rate</th><th>State</th></tr></thead>
        <tbody>${keys.map((k) => html`<tr><td class="mono">${k.flowControlKey}</td><td class="num">${fmtNum(k.waitListSize)}</td>
          <td class="num">${k.parallelismCount ?? 0} / ${k.parallelismMax ?? '∞'}</td><td class="num">${k.rateCount ?? 0} / ${k.rateMax ?? '∞'} per ${k.ratePeriod ?? 1}s</td>
          <td>${k.isPaused ? html`<${Badge} state="paused">paused<//>` : html`<${Badge} state="active">active<//>`}</td></tr>`)}</tbody></table>`}
    <//>`}<//>`;
}

function KeysTab() {
  const keys = useLoad(() => queue('GET', 'keys'), []);
  const [dialog, confirm] = useConfirm();
  const [shown, setShown] = useState(false);
  const mask = (k) => (shown ? k : `${k.slice(0, 8)}…`);
  return html`${dialog}<${Card} title="Signing keys" actions=${html`<button class="small" onClick=${() => setShown(!shown)}>${shown ? 'Hide' : 'Show'}</button>
      <${Action} class="small danger" onClick=${() => confirm({ title: 'Rotate signing keys', danger: true, confirmLabel: 'Rotate',
        children: html`The next key becomes the current key and a new next key is generated. Receivers that verify with both keys keep working; update <code>QSTASH_CURRENT_SIGNING_KEY</code> / <code>QSTASH_NEXT_SIGNING_KEY</code> in your apps.`,
        onConfirm: () => queue('POST', 'keys/rotate').then(keys.reload) })} data-rotate>Rotate…<//>`}>
    <${Loaded} state=${keys}>${(k) => html`<dl class="kv"><dt>Current</dt><dd class="mono" data-key="current">${mask(k.current)}</dd><dt>Next</dt><dd class="mono" data-key="next">${mask(k.next)}</dd></dl>`}<//>
  <//>`;
}

export function QueuePage({ route }) {
  const tab = route.parts[1] ?? 'logs';
  const body = { logs: LogsTab, dlq: DlqTab, schedules: SchedulesTab, queues: QueuesTab, 'url-groups': UrlGroupsTab, 'flow-control': FlowControlTab, keys: KeysTab }[tab] ?? LogsTab;
  return html`<${Tabs} items=${TABS} active=${`#/queue/${tab}`} /><${body} route=${route} />`;
}
