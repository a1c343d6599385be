// Overview: each area's health, request and error rates, queue depth by state, DLQ size,
// deliveries per second, the last backup, and charts of the last hour (sampled by svc every 10 s,
// kept in memory).
import { api, html, useEffect, useState, Card, Chart, Stat, Notice, Badge, fmtNum, fmtAgo, fmtBytes, fmtTime } from '../lib.js';

const COLORS = { queue: '#4f46e5', kv: '#0f8a5f', vector: '#d97706', mgmt: '#6b7385' };
const STATES = [
  ['ready', 'Ready', 'waiting to be delivered'],
  ['delayed', 'Delayed', 'due later (delay, retry backoff)'],
  ['inFlight', 'In flight', 'being delivered now'],
  ['held', 'Held', 'waiting for queue / flow-control capacity'],
];

export function OverviewPage() {
  const [data, setData] = useState();
  const [error, setError] = useState();
  useEffect(() => {
    let live = true;
    const load = () => api('GET', 'overview').then((d) => { if (live) { setData(d); setError(undefined); } }, (e) => live && setError(e));
    load();
    const t = setInterval(load, 10_000);
    return () => { live = false; clearInterval(t); };
  }, []);
  if (error) return html`<${Notice} kind="error">${error.message}<//>`;
  if (!data) return html`<div class="empty">Loading…</div>`;

  const samples = data.samples;
  const last = samples[samples.length - 1];
  const areas = Object.keys(data.health.areas);
  const rateAreas = [...new Set(samples.flatMap((s) => Object.keys(s.rates)))].sort();
  const xs = samples.map((s) => s.t / 1000);
  const sum = (s, f) => Object.values(s?.rates ?? {}).reduce((a, r) => a + r[f], 0);
  const q = data.queue;
  const qs = samples.filter((s) => s.queue);

  return html`
    <div class="grid cols-4" style="margin-bottom:18px">
      ${areas.map((a) => html`<div class="stat" data-area=${a}>
        <div class="label">${a}</div>
        <div class="value" style="font-size:18px"><span class=${`dot ${data.health.areas[a] === 'ok' ? 'ok' : 'bad'}`}></span>${data.health.areas[a] === 'ok' ? 'Healthy' : 'Down'}</div>
        <div class="hint">${last?.rates[a] ? `${fmtNum(last.rates[a].requests, 1)} req/s · ${fmtNum(last.rates[a].errors, 2)} 5xx/s` : 'no traffic sampled yet'}</div>
      </div>`)}
    </div>
    <div class="grid cols-4" style="margin-bottom:18px">
      <${Stat} label="Requests / s" value=${fmtNum(sum(last, 'requests'), 1)} hint="all areas, last 10 s" />
      <${Stat} label="Error rate" value=${last && sum(last, 'requests') > 0 ? `${fmtNum((100 * sum(last, 'errors')) / sum(last, 'requests'), 2)} %` : '0 %'} hint=${`${fmtNum(sum(last, 'errors'), 2)} 5xx/s · ${fmtNum(sum(last, 'clientErrors'), 2)} 4xx/s`} />
      <${Stat} label="Deliveries / s" value=${q ? fmtNum(qs[qs.length - 1]?.queue.deliveries ?? 0, 1) : '—'} hint=${q ? `${fmtNum(qs[qs.length - 1]?.queue.failures ?? 0, 1)} failed attempts/s` : 'queue area not running'} />
      <${Stat} label="Dead-letter queue" value=${q?.dlq !== undefined ? html`<a href="#/queue/dlq">${fmtNum(q.dlq)}</a>` : '—'} hint="messages that exhausted their retries" />
    </div>
    ${data.backup && html`<div class="grid cols-4" style="margin-bottom:18px" data-stat="backup">
      <${Stat} label="Last backup"
        value=${data.backup.running ? 'Running…' : !data.backup.last ? 'None yet' : data.backup.last.ok ? fmtAgo(data.backup.last.finishedAt) : html`<span class="dot bad"></span>Failed`}
        hint=${!data.backup.last ? 'svc backup <dir>, POST /v2/backup or SVC_BACKUP_INTERVAL' : data.backup.last.ok ? `${fmtTime(data.backup.last.finishedAt)} · ${fmtBytes(data.backup.last.bytes)} · ${data.backup.last.dir}` : `${fmtTime(data.backup.last.finishedAt)} · ${data.backup.last.error}`} />
    </div>`}
    ${q?.messages && html`<${Card} title="Queue depth by state">
      <div class="grid cols-4">
        ${STATES.map(([k, label, hint]) => html`<div data-state=${k}><${Badge} state=${k === 'inFlight' ? 'IN_PROGRESS' : k === 'ready' ? 'ACTIVE' : k === 'delayed' ? 'DELAYED' : 'RETRY'}>${label}<//>
          <div style="font-size:22px;font-weight:650;margin-top:6px">${fmtNum(q.messages?.[k] ?? 0)}</div><div class="muted small">${hint}</div></div>`)}
      </div>
    <//>`}
    ${samples.length < 2 ? html`<${Notice}>Charts fill in as svc samples every 10 seconds (the last hour is kept in memory).<//>` : html`
    <div class="grid cols-2">
      <${Card} title="Requests per second (last hour)">
        <${Chart} series=${rateAreas.map((a) => ({ label: a, stroke: COLORS[a] ?? '#888' }))} data=${[xs, ...rateAreas.map((a) => samples.map((s) => s.rates[a]?.requests ?? 0))]} />
      <//>
      <${Card} title="Errors per second (last hour)">
        <${Chart} series=${[{ label: '5xx', stroke: '#c0262d' }, { label: '4xx', stroke: '#d97706' }]} data=${[xs, samples.map((s) => sum(s, 'errors')), samples.map((s) => sum(s, 'clientErrors'))]} />
      <//>
      ${qs.length > 1 && html`<${Card} title="Deliveries per second (last hour)">
        <${Chart} series=${[{ label: 'delivered', stroke: '#0f8a5f' }, { label: 'failed attempts', stroke: '#c0262d' }]} data=${[qs.map((s) => s.t / 1000), qs.map((s) => s.queue.deliveries), qs.map((s) => s.queue.failures)]} />
      <//>`}
      ${qs.length > 1 && html`<${Card} title="Queue depth and DLQ (last hour)">
        <${Chart} series=${[{ label: 'ready', stroke: '#4f46e5' }, { label: 'delayed', stroke: '#1f66c1' }, { label: 'DLQ', stroke: '#c0262d' }]} data=${[qs.map((s) => s.t / 1000), qs.map((s) => s.queue.messages.ready ?? 0), qs.map((s) => s.queue.messages.delayed ?? 0), qs.map((s) => s.queue.dlq)]} />
      <//>`}
    </div>`}
  `;
}
