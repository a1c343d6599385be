// The page table: which hash shows which page, and the sidebar entries.
import { OverviewPage } from './overview.js';
import { MessagePage, QueuePage } from './queue.js';
import { RunPage, WorkflowsPage } from './workflows.js';
import { KeyPage, KvPage } from './kv.js';
import { VectorPage } from './vector.js';

/** `match(parts)` decides whether a page shows the route; the first page is the fallback. */
export const PAGES = [
  { title: 'Overview', nav: 'overview', match: (p) => p[0] === 'overview' || p.length === 0, component: OverviewPage },
  { title: 'Message', nav: 'queue/logs', crumb: 'Queue', match: (p) => p[0] === 'queue' && p[1] === 'message', component: MessagePage },
  { title: 'Queue', match: (p) => p[0] === 'queue', component: QueuePage },
  { title: 'Workflow run', nav: 'workflows/runs', crumb: 'Workflows', match: (p) => p[0] === 'workflows' && p[1] === 'run', component: RunPage },
  { title: 'Workflows', match: (p) => p[0] === 'workflows', component: WorkflowsPage },
  { title: 'Key', nav: 'kv/keys', crumb: 'KV', match: (p) => p[0] === 'kv' && p[1] === 'key', component: KeyPage },
  { title: 'KV', match: (p) => p[0] === 'kv', component: KvPage },
  { title: 'Vector', nav: 'vector', match: (p) => p[0] === 'vector', component: VectorPage },
];

/** Sidebar entries; `area` hides an entry when that area does not run. */
export const NAV = [
  { key: 'overview', href: '#/overview', label: 'Overview' },
  { key: 'queue/logs', href: '#/queue/logs', label: 'Logs', group: 'Queue', area: 'queue' },
  { key: 'queue/dlq', href: '#/queue/dlq', label: 'Dead-letter queue', area: 'queue' },
  { key: 'queue/schedules', href: '#/queue/schedules', label: 'Schedules', area: 'queue' },
  { key: 'queue/queues', href: '#/queue/queues', label: 'Queues', area: 'queue' },
  { key: 'queue/url-groups', href: '#/queue/url-groups', label: 'URL groups', area: 'queue' },
  { key: 'queue/flow-control', href: '#/queue/flow-control', label: 'Flow control', area: 'queue' },
  { key: 'queue/keys', href: '#/queue/keys', label: 'Signing keys', area: 'queue' },
  { key: 'workflows/runs', href: '#/workflows/runs', label: 'Runs', group: 'Workflows', area: 'queue' },
  { key: 'workflows/failed', href: '#/workflows/failed', label: 'Failed runs', area: 'queue' },
  { key: 'kv/keys', href: '#/kv/keys', label: 'Keys', group: 'KV', area: 'kv' },
  { key: 'kv/command', href: '#/kv/command', label: 'Command', area: 'kv' },
  { key: 'vector', href: '#/vector', label: 'Indexes', group: 'Vector', area: 'vector' },
];
