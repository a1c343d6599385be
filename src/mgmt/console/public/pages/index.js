// The page table: which hash shows which page, and the sidebar entries.
import { OverviewPage } from './overview.js';

/** `match(parts)` decides whether a page shows the route; the first page is the fallback. */
export const PAGES = [
  { title: 'Overview', nav: 'overview', match: (p) => p[0] === 'overview' || p.length === 0, component: OverviewPage },
];

/** Sidebar entries; `area` hides an entry when that area does not run. */
export const NAV = [
  { key: 'overview', href: '#/overview', label: 'Overview' },
];
