// The console's shell: sign-in form, sidebar navigation and the hash router (#/overview, #/queue/...).
import { api, html, render, session, setSignedOutHandler, useEffect, useRoute, useState, Notice } from './lib.js';
import { PAGES, NAV } from './pages/index.js';

function Login({ onSignedIn, reason }) {
  const [user, setUser] = useState('');
  const [password, setPassword] = useState('');
  const [error, setError] = useState(reason);
  const [busy, setBusy] = useState(false);
  const submit = async (e) => {
    e.preventDefault();
    setBusy(true); setError(undefined);
    try {
      onSignedIn(await api('POST', 'login', { user, password }));
    } catch (err) {
      setError(err.message);
      setBusy(false);
    }
  };
  return html`<div class="login-wrap">
    <form class="login" onSubmit=${submit} autocomplete="on">
      <h1>svc console</h1>
      <p>Sign in with the management account.</p>
      ${error && html`<${Notice} kind="error">${error}<//>`}
      <label>User<input name="user" autocomplete="username" value=${user} onInput=${(e) => setUser(e.target.value)} autofocus required /></label>
      <label>Password<input name="password" type="password" autocomplete="current-password" value=${password} onInput=${(e) => setPassword(e.target.value)} required /></label>
      <button class="primary" type="submit" disabled=${busy}>${busy ? 'Signing in…' : 'Sign in'}</button>
    </form>
  </div>`;
}

function Sidebar({ active, onLogout }) {
  return html`<aside class="side"><div class="side-inner">
    <div class="brand"><span class="logo">s</span>svc console</div>
    <nav class="nav">
      ${NAV.filter((n) => !n.area || session.areas.includes(n.area)).map((n) => html`
        ${n.group && html`<div class="group">${n.group}</div>`}
        <a href=${n.href} class=${`${n.sub ? 'sub ' : ''}${active === n.key ? 'active' : ''}`}>${n.label}</a>`)}
    </nav>
    <div class="foot">
      <div>Signed in as <b>${session.user}</b></div>
      ${session.readonly && html`<div style="margin-top:6px"><span class="readonly-tag">read-only</span></div>`}
      <button class="small" onClick=${onLogout} data-logout>Sign out</button>
    </div>
  </div></aside>`;
}

function Shell({ onLogout }) {
  const route = useRoute();
  const key = route.parts.length ? route.parts.slice(0, 2).join('/') : 'overview';
  const page = PAGES.find((p) => p.match(route.parts)) ?? PAGES[0];
  useEffect(() => { document.title = `${page.title} · svc console`; }, [page]);
  return html`<div class="shell">
    <${Sidebar} active=${page.nav ?? key} onLogout=${onLogout} />
    <main class="main">
      <header class="topbar"><h1>${page.title}</h1><span class="crumbs">${page.crumb ?? ''}</span></header>
      <div class="content"><${page.component} route=${route} /></div>
    </main>
  </div>`;
}

function App() {
  const [state, setState] = useState('loading');
  const [reason, setReason] = useState();
  const adopt = (info) => {
    Object.assign(session, info);
    setState('in');
  };
  useEffect(() => {
    setSignedOutHandler(() => { setReason('Your session ended: sign in again.'); setState('out'); });
    api('GET', 'session').then((s) => (s.signedIn ? adopt(s) : setState('out')), () => setState('out'));
  }, []);
  const logout = async () => {
    try { await api('POST', 'logout'); } finally { setReason(undefined); setState('out'); }
  };
  if (state === 'loading') return html`<div class="boot">Loading…</div>`;
  if (state === 'out') return html`<${Login} onSignedIn=${adopt} reason=${reason} />`;
  return html`<${Shell} onLogout=${logout} />`;
}

render(html`<${App} />`, document.getElementById('root'));
