// The dashboard: a thin client of the public HTTP API. The session token lives
// in sessionStorage (gone when the tab closes); every value shown is set with
// textContent, never parsed as HTML.
const EVENT_TYPES = ['call.started', 'call.ended', 'call.transcribed', 'call.completed', 'call.takeover', 'message.received', 'message.sent', 'webhook.ping'];
const $ = (id) => document.getElementById(id);
let token = sessionStorage.getItem('svc_session');
let feed = null;
let feedTimer = null;

function say(message, isError = false) {
  $('status').textContent = message;
  $('status').className = isError ? 'error' : '';
}

async function api(method, path, body) {
  const headers = { accept: 'application/json' };
  if (token) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const data = res.status === 204 ? null : await res.json().catch(() => null);
  if (!res.ok) {
    const err = data?.error;
    const details = err?.details?.map((d) => `${d.path}: ${d.message}`).join('; ');
    const failure = new Error(`${err?.message ?? `HTTP ${res.status}`}${details ? ` (${details})` : ''}`);
    failure.status = res.status;
    throw failure;
  }
  return data;
}

function el(tag, text, attrs = {}) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  return node;
}

async function showApp() {
  const { user } = await api('GET', '/api/auth/me');
  $('whoami').textContent = `${user.name} <${user.email}>`;
  $('key-preview').textContent = user.api_key ? user.api_key.preview : 'none';
  $('auth').hidden = true;
  $('app').hidden = false;
  $('logout').hidden = false;
  await loadHooks();
}

function showAuth() {
  stopFeed();
  $('auth').hidden = false;
  $('app').hidden = true;
  $('logout').hidden = true;
  $('whoami').textContent = '';
}

async function onAuth(event, path) {
  event.preventDefault();
  const form = new FormData(event.target);
  try {
    const body = Object.fromEntries([...form.entries()].map(([k, v]) => [k, String(v)]));
    const res = await api('POST', path, body);
    token = res.token;
    sessionStorage.setItem('svc_session', token);
    say(path.endsWith('signup') ? 'Account created.' : 'Logged in.');
    await showApp();
  } catch (err) {
    say(err.message, true);
  }
}

async function loadHooks() {
  const { webhooks } = await api('GET', '/api/v1/webhooks');
  const rows = webhooks.map((hook) => {
    const tr = el('tr');
    const last = String(hook.last_status ?? hook.last_error ?? '—');
    tr.append(el('td', hook.url), el('td', hook.events.join(', ')), el('td', hook.enabled === false ? `${last} · disabled` : last), el('td', hook.last_delivery_at ? new Date(hook.last_delivery_at).toLocaleString() : '—'));
    const actions = el('td');
    const ping = el('button', 'Ping', { type: 'button', 'aria-label': `Ping ${hook.url}` });
    ping.onclick = () => act(async () => { await api('POST', `/api/v1/webhooks/${hook.id}/ping`); say('Ping sent.'); setTimeout(loadHooks, 1500); });
    const attempts = el('button', 'Attempts', { type: 'button', class: 'secondary', 'aria-label': `Recent attempts for ${hook.url}` });
    attempts.onclick = () => act(() => showAttempts(hook));
    const del = el('button', 'Delete', { type: 'button', class: 'secondary', 'aria-label': `Delete ${hook.url}` });
    del.onclick = () => act(async () => { await api('DELETE', `/api/v1/webhooks/${hook.id}`); say('Webhook deleted.'); await loadHooks(); });
    const enabled = hook.enabled !== false;
    const toggle = el('button', enabled ? 'Disable' : 'Enable', { type: 'button', class: 'secondary', 'aria-label': `${enabled ? 'Disable' : 'Enable'} ${hook.url}` });
    toggle.onclick = () => act(async () => {
      await api('PATCH', `/api/v1/webhooks/${hook.id}`, { enabled: !enabled });
      say(enabled ? 'Webhook disabled: nothing is sent to it until it is enabled again.' : 'Webhook enabled: it gets events from now on.');
      await loadHooks();
    });
    actions.append(ping, ' ', attempts, ' ', toggle, ' ', rotateButton(hook), ' ', del);
    tr.append(actions);
    return tr;
  });
  $('hooks').replaceChildren(...rows);
}

// Secret rotation: the new secret is shown where a new webhook's is; the old one
// keeps signing for the API's default grace period (24 h), so there is time to switch.
function rotateButton(hook) {
  const button = el('button', 'Rotate secret', { type: 'button', class: 'secondary', 'aria-label': `Rotate the signing secret of ${hook.url}` });
  button.onclick = () => act(async () => {
    const res = await api('POST', `/api/v1/webhooks/${hook.id}/secret/rotate`, {});
    $('hook-secret-value').textContent = res.secret;
    $('hook-secret').hidden = false;
    const until = res.previous_secret_expires_at ? new Date(res.previous_secret_expires_at).toLocaleString() : null;
    say(`New signing secret for ${hook.url}. ${until ? `The old one also signs deliveries until ${until}.` : 'The old one no longer signs anything.'}`);
  });
  return button;
}

async function showAttempts(hook) {
  const res = await api('GET', `/api/v1/webhooks/${hook.id}/deliveries`);
  const list = res.attempts ?? res.deliveries ?? [];
  $('attempts-title').textContent = `Recent attempts: ${hook.url}`;
  $('attempts').replaceChildren(...list.map((a) => el('li', `${new Date(a.at ?? a.created_at).toLocaleString()} · attempt ${a.attempt} · ${a.status ?? a.outcome} · ${a.duration_ms} ms · ${a.event_id}`)));
  if (list.length === 0) $('attempts').replaceChildren(el('li', 'No attempts yet.'));
  $('attempts-panel').hidden = false;
}

async function act(fn) {
  try {
    await fn();
  } catch (err) {
    say(err.message, true);
  }
}

function showEvent(e) {
  const record = JSON.parse(e.data);
  $('feed').prepend(el('li', `${record.created_at} ${record.type} ${JSON.stringify(record.data)}`));
  while ($('feed').children.length > 200) $('feed').lastChild.remove();
}

// The server ends each stream after about 50 s and stream tokens are short-lived:
// reconnect with a fresh token, resuming after the last event seen (no gap).
async function openFeed(since) {
  const { stream_url: url } = await api('POST', '/api/v1/events/stream-token');
  const sep = url.includes('?') ? '&' : '?';
  feed = new EventSource(since ? `${url}${sep}since=${encodeURIComponent(since)}` : url);
  $('feed-toggle').textContent = 'Stop live feed';
  $('feed-state').textContent = 'connecting';
  feed.onopen = () => { $('feed-state').textContent = 'live'; };
  for (const type of EVENT_TYPES) feed.addEventListener(type, showEvent);
  feed.onerror = () => {
    const last = feed?.lastEventId || since;
    feed?.close();
    $('feed-state').textContent = 'reconnecting';
    feedTimer = setTimeout(() => act(() => openFeed(last)), 1000);
  };
}

async function startFeed() {
  stopFeed();
  await openFeed(undefined);
}

function stopFeed() {
  clearTimeout(feedTimer);
  feed?.close();
  feed = null;
  $('feed-state').textContent = 'stopped';
  $('feed-toggle').textContent = 'Start live feed';
}

$('login-form').addEventListener('submit', (e) => onAuth(e, '/api/auth/login'));
$('signup-form').addEventListener('submit', (e) => onAuth(e, '/api/auth/signup'));
$('logout').addEventListener('click', () => { token = null; sessionStorage.removeItem('svc_session'); showAuth(); say('Logged out.'); });
$('key-create').addEventListener('click', () => act(async () => {
  const res = await api('POST', '/api/auth/api-key');
  $('key-raw').textContent = res.api_key;
  $('key-reveal').hidden = false;
  $('key-preview').textContent = res.preview;
  say('New API key created; any previous key stopped working.');
}));
$('key-revoke').addEventListener('click', () => act(async () => {
  await api('DELETE', '/api/auth/api-key');
  $('key-reveal').hidden = true;
  $('key-preview').textContent = 'none';
  say('API key revoked.');
}));
$('hook-form').addEventListener('submit', (e) => {
  e.preventDefault();
  act(async () => {
    const form = new FormData(e.target);
    const events = String(form.get('events') || '*').split(',').map((s) => s.trim()).filter(Boolean);
    const description = String(form.get('description') || '');
    const hook = await api('POST', '/api/v1/webhooks', { url: String(form.get('url')), events, ...(description ? { description } : {}) });
    $('hook-secret-value').textContent = hook.secret;
    $('hook-secret').hidden = false;
    e.target.reset();
    say('Webhook added.');
    await loadHooks();
  });
});
$('feed-toggle').addEventListener('click', () => act(() => (feed ? stopFeed() : startFeed())));

if (token) {
  showApp().catch((err) => {
    // Only a refused session logs the user out; anything else is shown and kept.
    if (err.status === 401) {
      token = null;
      sessionStorage.removeItem('svc_session');
      showAuth();
    }
    say(err.message, true);
  });
}
else showAuth();
