// Workflow pages: runs by state, one run's timeline (steps, parallel branches side by side,
// retries and errors), failed runs from the DLQ with resume / restart / delete, and cancel.
// Data: the queue's public workflow API (/v2/workflows/...), the one the workflow SDK uses.
import {
  html, useState, queue, qs, go, Badge, Card, Tabs, Notice, Value, Pager, Action,
  useLoad, Loaded, useConfirm, useCursor, fmtTime, session,
} from '../lib.js';

const TABS = [['#/workflows/runs', 'Runs'], ['#/workflows/failed', 'Failed runs']];
const RUN_STATES = ['RUN_STARTED', 'RUN_SUCCESS', 'RUN_FAILED', 'RUN_CANCELED'];
const PAGE_SIZE = 20;

function RunsTab({ route }) {
  const state = route.query.get('state') ?? '';
  const pager = useCursor([state]);
  const runs = useLoad(() => queue('GET', `workflows/logs${qs({ state, count: PAGE_SIZE, cursor: pager.cursor })}`), [state, pager.cursor]);
  return html`
    <div class="row" style="margin-bottom:14px">
      ${['', ...RUN_STATES].map((s) => html`<a href=${`#/workflows/runs${qs({ state: s })}`} class=${`badge ${s === state ? 'accent' : ''}`} style="padding:4px 12px" data-run-state=${s || 'all'}>${s ? s.replace('RUN_', '').toLowerCase() : 'all'}</a>`)}
    </div>
    <${Card} title="Workflow runs" flush>
      <${Loaded} state=${runs}>${(d) => html`
        ${d.runs.length === 0 ? html`<div class="empty">No runs${state ? ` in state ${state}` : ''}.</div>` : html`
        <table class="t" data-table="runs">
          <thead><tr><th>Run</th><th>Workflow URL</th><th>State</th><th class="num">Steps</th><th>Started</th><th>Completed</th></tr></thead>
          <tbody>${d.runs.map((r) => html`<tr class="click" data-run=${r.workflowRunId} onClick=${() => go(`#/workflows/run/${encodeURIComponent(r.workflowRunId)}`)}>
            <td class="mono small">${r.workflowRunId}</td><td class="clip" title=${r.workflowUrl}>${r.workflowUrl}</td>
            <td><${Badge} state=${r.workflowState} /></td>
            <td class="num">${(r.steps ?? []).filter((g) => g.type !== 'next').reduce((a, g) => a + g.steps.length, 0)}</td>
            <td class="small">${fmtTime(r.workflowRunCreatedAt)}</td><td class="small">${fmtTime(r.workflowRunCompletedAt)}</td>
          </tr>`)}</tbody></table>`}
        <${Pager} hasPrev=${pager.page > 1} next=${d.cursor} onPrev=${pager.prev} onNext=${() => pager.next(d.cursor)} info=${`page ${pager.page}`} />`}<//>
    <//>`;
}

function Step({ s, started }) {
  const took = s.createdAt && started ? s.createdAt - started : undefined;
  return html`<div class="step" data-step=${s.stepName}>
    <div class="title">${s.stepName ?? '(step)'} <span class="badge">${s.stepType ?? ''}</span>${s.state && html`<${Badge} state=${s.state} />`}<span class="spacer"></span>
      <span class="muted small">${fmtTime(s.createdAt)}${took !== undefined ? ` · +${took} ms` : ''}</span></div>
    ${s.out !== undefined && html`<div style="margin-top:8px"><${Value} text=${s.out} /></div>`}
    ${s.retries !== undefined && html`<div class="muted small" style="margin-top:6px">retries: ${s.retries}</div>`}
    ${(s.errors ?? []).map((e) => html`<div class="notice error small" style="margin:8px 0 0">${typeof e === 'string' ? e : `${e.status ?? ''} ${e.error ?? ''} ${e.body ?? ''}`}</div>`)}
  </div>`;
}

export function RunPage({ route }) {
  const id = route.parts[2];
  const [dialog, confirm] = useConfirm();
  const run = useLoad(() => queue('GET', `workflows/logs${qs({ workflowRunId: id, count: 1 })}`).then((d) => d.runs[0] ?? null), [id]);
  return html`${dialog}<div class="row" style="margin-bottom:14px"><a href="#/workflows/runs">← Runs</a></div>
    <${Loaded} state=${run}>${(r) => {
      if (!r) return html`<${Notice} kind="error">Run ${id} not found.<//>`;
      const groups = r.steps ?? [];
      const start = r.workflowRunCreatedAt;
      return html`
        <${Card} title="Run" actions=${r.workflowState === 'RUN_STARTED' && html`<${Action} class="small danger" data-cancel onClick=${() => confirm({
          title: 'Cancel run', danger: true, confirmLabel: 'Cancel run', children: html`Cancel <code>${id}</code>? Its remaining steps will not run.`,
          onConfirm: () => queue('DELETE', `workflows/runs/${encodeURIComponent(id)}?cancel=true`).then(run.reload) })}>Cancel run<//>`}>
          <dl class="kv">
            <dt>Run ID</dt><dd class="mono">${r.workflowRunId}</dd>
            <dt>State</dt><dd><${Badge} state=${r.workflowState} /></dd>
            <dt>Workflow URL</dt><dd>${r.workflowUrl}</dd>
            <dt>Started</dt><dd>${fmtTime(r.workflowRunCreatedAt)}</dd>
            <dt>Completed</dt><dd>${fmtTime(r.workflowRunCompletedAt)}</dd>
            ${r.dlqId && html`<dt>DLQ entry</dt><dd><a href="#/workflows/failed">${r.dlqId}</a></dd>`}
            ${r.label && html`<dt>Label</dt><dd>${r.label}</dd>`}
          </dl>
          ${r.workflowRunResponse !== undefined && html`<div style="margin-top:12px"><div class="muted small" style="margin-bottom:4px">Response</div><${Value} text=${r.workflowRunResponse} /></div>`}
        <//>
        <${Card} title="Timeline">
          <div class="timeline" data-timeline>
            ${groups.map((g, i) => {
              const prev = i > 0 ? Math.max(...groups[i - 1].steps.map((s) => s.createdAt ?? 0)) : start;
              const label = g.type === 'next' ? html`<div class="muted small">next (in progress / retrying)</div>` : g.type === 'parallel' ? html`<div class="muted small">parallel (${g.steps.length} branches)</div>` : null;
              return html`<div>${label}${g.type === 'parallel'
                ? html`<div class="branches" data-parallel>${g.steps.map((s) => html`<${Step} s=${s} started=${prev} />`)}</div>`
                : g.steps.map((s) => html`<${Step} s=${s} started=${prev} />`)}</div>`;
            })}
          </div>
        <//>`;
    }}<//>`;
}

function FailedTab() {
  const pager = useCursor([]);
  const [result, setResult] = useState();
  const [dialog, confirm] = useConfirm();
  const list = useLoad(() => queue('GET', `workflows/dlq${qs({ count: PAGE_SIZE, cursor: pager.cursor })}`), [pager.cursor]);
  const act = (m, action) => confirm({
    title: `${action[0].toUpperCase()}${action.slice(1)} run`, danger: action === 'delete', confirmLabel: action[0].toUpperCase() + action.slice(1),
    children: {
      resume: html`A new run continues from the failed step; completed steps are kept.`,
      restart: html`A new run starts from the beginning with the original payload; earlier step results are discarded.`,
      delete: html`The failed run leaves the DLQ for good.`,
    }[action],
    onConfirm: async () => {
      if (action === 'delete') {
        await queue('DELETE', `workflows/dlq/${encodeURIComponent(m.dlqId)}`);
        setResult(`Deleted the failed run ${m.workflowRunId}.`);
      } else {
        const r = await queue('POST', `workflows/dlq/${action}/${encodeURIComponent(m.dlqId)}`);
        setResult(`${action === 'resume' ? 'Resumed' : 'Restarted'}: run ${r.workflowRunId}.`);
      }
      list.reload();
    },
  });
  return html`${dialog}${result && html`<${Notice} kind="ok">${result}<//>`}
    <${Card} title="Failed runs (dead-letter queue)" flush>
      <${Loaded} state=${list}>${(d) => html`
        ${d.messages.length === 0 ? html`<div class="empty">No failed runs.</div>` : html`
        <table class="t" data-table="failed-runs">
          <thead><tr><th>Run</th><th>Workflow URL</th><th class="num">Status</th><th>Response</th><th>Failure function</th><th></th></tr></thead>
          <tbody>${d.messages.map((m) => html`<tr data-failed=${m.workflowRunId}>
            <td class="mono small"><a href=${`#/workflows/run/${encodeURIComponent(m.workflowRunId)}`}>${m.workflowRunId}</a></td>
            <td class="clip" title=${m.workflowUrl}>${m.workflowUrl}</td>
            <td class="num">${m.responseStatus ? html`<${Badge} state="ERROR">${m.responseStatus}<//>` : ''}</td>
            <td class="clip wide mono small" title=${m.responseBody ?? ''}>${m.responseBody ?? m.error ?? ''}</td>
            <td>${m.failureCallbackInfo?.state ? html`<${Badge} state=${m.failureCallbackInfo.state === 'CALLBACK_SUCCESS' ? 'ok' : m.failureCallbackInfo.state}>${m.failureCallbackInfo.state}<//>` : '—'}</td>
            <td class="right">${!session.readonly && html`<div class="row">
              <button class="small" onClick=${() => act(m, 'resume')} data-resume>Resume</button>
              <button class="small" onClick=${() => act(m, 'restart')} data-restart>Restart</button>
              <button class="small danger" onClick=${() => act(m, 'delete')} data-delete>Delete</button></div>`}</td>
          </tr>`)}</tbody></table>`}
        <${Pager} hasPrev=${pager.page > 1} next=${d.cursor} onPrev=${pager.prev} onNext=${() => pager.next(d.cursor)} info=${`page ${pager.page}`} />`}<//>
    <//>`;
}

export function WorkflowsPage({ route }) {
  const tab = route.parts[1] === 'failed' ? 'failed' : 'runs';
  return html`<${Tabs} items=${TABS} active=${`#/workflows/${tab}`} />${tab === 'failed' ? html`<${FailedTab} />` : html`<${RunsTab} route=${route} />`}`;
}
