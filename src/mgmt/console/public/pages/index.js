// The page table: which hash shows which page, and the sidebar entries.
import { OverviewPage } from './overview.js';
import { MessagePage, QueuePage } from './queue.js';

/** `match(parts)` decides whether a page shows the route; the first page is the fallback. */
export const PAGES = [
  { title: 'Overview', nav: 'overview', match: (p) => p[0] === 'overview' || p.length === 0, component: OverviewPage },
  { title: 'Message', nav: 'queue/logs', crumb: 'Queue', match: (p) => p[0] === 'queue' && p[1] === 'message', component: MessagePage },
  { title: 'Queue', match: (p) => p[0] === 'queue', component: QueuePage },
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
];
