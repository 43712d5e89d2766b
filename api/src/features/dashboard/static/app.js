// The dashboard: a thin client of the public HTTP API. The session token lives
// in sessionStorage (gone when the tab closes); every value shown is set with
// textContent, never parsed as HTML.
const EVENT_TYPES = ['call.started', 'call.ended', 'call.transcribed', 'call.completed', 'call.takeover', 'message.received', 'message.sent', 'webhook.ping', 'webhook.disabled', 'webhook.delivery_exhausted'];
const $ = (id) => document.getElementById(id);
let token = sessionStorage.getItem('svc_session');
let feed = null;
let feedTimer = null;
let statsWindow = '1h';
let hooksShown = [];
// The event log pages: the `since` cursor of each page seen so far (the first page has none).
const log = { pages: [undefined], at: 0, type: '', limit: 25, newestFirst: false };

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
  $('user-id').textContent = user.id;
  $('emit-hint').textContent = `npm run emit -- --account ${user.id} --type random --count 10`;
  $('key-preview').textContent = user.api_key ? user.api_key.preview : 'none';
  $('auth').hidden = true;
  $('app').hidden = false;
  $('logout').hidden = false;
  await loadHooks();
  await showLogPage(0);
  const linked = /^#event=(evt_[0-9a-f]{24})$/.exec(location.hash);
  if (linked) await showEventDetail(linked[1]);
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
  hooksShown = webhooks;
  const rows = webhooks.map((hook) => {
    const tr = el('tr');
    const last = String(hook.last_status ?? hook.last_error ?? '—');
    const urlCell = el('td', hook.url);
    const headerNames = Object.keys(hook.headers ?? {});
    if (headerNames.length > 0) urlCell.append(el('br'), el('small', `Headers: ${headerNames.map((n) => `${n}: ${hook.headers[n]}`).join(', ')}`, { class: 'note' }));
    if (hook.ordering === 'fifo') urlCell.append(el('br'), el('small', 'Ordered (FIFO): one at a time, in log order', { class: 'note' }));
    tr.append(urlCell, el('td', hook.events.join(', ')), el('td', hook.enabled === false ? `${last} · ${disabledText(hook)}` : last), el('td', hook.last_delivery_at ? new Date(hook.last_delivery_at).toLocaleString() : '—'));
    const actions = el('td', undefined, { class: 'actions' });
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
    actions.append(ping, ' ', attempts, ' ', toggle, ' ', recoverButton(hook), ' ', ...secretButtons(hook), del);
    tr.append(actions);
    return tr;
  });
  $('hooks').replaceChildren(...rows);
  await loadActivity();
}

/** The buttons of the signing-secret operations of one subscription: show it, rotate it. */
function secretButtons(hook) {
  const reveal = el('button', 'Show secret', { type: 'button', class: 'secondary', 'aria-label': `Show the signing secret of ${hook.url}` });
  reveal.onclick = () => act(async () => {
    const { secret } = await api('POST', `/api/v1/webhooks/${hook.id}/secret`);
    showSecret(`Signing secret of ${hook.url}:`, secret);
  });
  return [reveal, ' ', rotateButton(hook), ' '];
}

function showSecret(title, secret) {
  $('hook-secret-title').textContent = title;
  $('hook-secret-value').textContent = secret;
  $('hook-secret').hidden = false;
}

// ---- Delivery activity: one card per subscription, a stacked bar per bucket (plain SVG). ----

const SVG_NS = 'http://www.w3.org/2000/svg';
const KINDS = ['succeeded', 'retrying', 'failed'];
const CHART = { width: 288, height: 72, top: 4, bottom: 14 };

function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

const clock = (iso) => new Date(iso).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });

/** A stacked bar chart of the stats' buckets; every bar says its numbers in a <title> (hover, screen readers). */
function chartOf(stats) {
  const { width, height, top, bottom } = CHART;
  const n = stats.buckets.length;
  const slot = width / n;
  const plot = height - top - bottom;
  const max = Math.max(1, ...stats.buckets.map((b) => b.succeeded + b.retrying + b.failed));
  const t = stats.totals;
  const root = svg('svg', { viewBox: `0 0 ${width} ${height}`, width, height, role: 'img', class: 'chart', 'aria-label': `${t.succeeded} succeeded, ${t.retrying} retrying, ${t.failed} failed, ${stats.window === '1h' ? 'last hour' : 'last day'}` });
  root.append(svg('line', { x1: 0, x2: width, y1: top + plot + 0.5, y2: top + plot + 0.5, class: 'axis' }));
  stats.buckets.forEach((b, i) => {
    const end = new Date(Date.parse(b.start) + stats.bucket_seconds * 1000).toISOString();
    const g = svg('g', { class: 'bucket', 'data-start': b.start, 'data-succeeded': b.succeeded, 'data-retrying': b.retrying, 'data-failed': b.failed });
    g.append(svg('title', {}, `${clock(b.start)}–${clock(end)}: ${b.succeeded} succeeded, ${b.retrying} retrying, ${b.failed} failed`));
    // A transparent full-height target, so an empty bucket still has a tooltip.
    g.append(svg('rect', { x: i * slot, y: top, width: slot, height: plot, class: 'hit' }));
    let y = top + plot;
    for (const kind of KINDS) {
      if (b[kind] === 0) continue;
      const h = Math.max(1, (b[kind] / max) * plot);
      y -= h;
      g.append(svg('rect', { x: i * slot + 1, y, width: Math.max(1, slot - 2), height: h, class: `bar ${kind}` }));
    }
    root.append(g);
  });
  root.append(svg('text', { x: 0, y: height - 2, class: 'tick' }, `${stats.window === '1h' ? '1 h' : '24 h'} ago (${clock(stats.from)})`));
  root.append(svg('text', { x: width, y: height - 2, class: 'tick end' }, 'now'));
  return root;
}

// Disabled by hand: "disabled"; by the delivery process: why and since when.
function disabledText(hook) {
  if (hook.disabled_reason !== 'endpoint_failing') return 'disabled';
  return `disabled: endpoint failing${hook.disabled_at ? ` (since ${new Date(hook.disabled_at).toLocaleString()})` : ''}`;
}

function cardOf(hook, stats) {
  const card = el('article', undefined, { class: 'card', 'data-hook': hook.id, 'aria-label': `Activity of ${hook.url}` });
  const head = el('h3', hook.url);
  if (hook.enabled === false) head.append(' ', el('span', disabledText(hook), { class: 'badge', title: hook.disabled_reason === 'endpoint_failing' ? 'Every attempt failed for the disabling period; enable it again once the endpoint is fixed' : 'Disabled by hand' }));
  const t = stats.totals;
  const numbers = el('p', undefined, { class: 'numbers' });
  numbers.append(
    el('span', `${t.succeeded} succeeded`, { class: 'count succeeded' }), ' · ',
    el('span', `${t.retrying} retrying`, { class: 'count retrying' }), ' · ',
    el('span', `${t.failed} failed`, { class: 'count failed' }),
  );
  const ms = (v) => (v === null ? '—' : `${v} ms`);
  const latency = el('p', undefined, { class: 'latency' });
  latency.append(el('span', `p50 ${ms(stats.latency_ms.p50)}`, { class: 'p50' }), ' · ', el('span', `p99 ${ms(stats.latency_ms.p99)}`, { class: 'p99' }));
  card.append(head, chartOf(stats), numbers, latency);
  if (stats.truncated) card.append(el('p', `Only the ${t.attempts} most recent attempts are counted.`, { class: 'note' }));
  return card;
}

async function loadActivity() {
  const hooks = hooksShown;
  const stats = await Promise.all(hooks.map((h) => api('GET', `/api/v1/webhooks/${h.id}/stats?window=${statsWindow}`)));
  const cards = hooks.map((h, i) => cardOf(h, stats[i]));
  $('activity').replaceChildren(...(cards.length > 0 ? cards : [el('p', 'No webhooks yet: add one above.')]));
}

function setWindow(win) {
  statsWindow = win;
  for (const b of document.querySelectorAll('[data-window]')) b.setAttribute('aria-pressed', String(b.dataset.window === win));
  return loadActivity();
}

// ---- The event log: the polling route, a type filter, pages by cursor, and one event's deliveries. ----

/** One read of GET /api/v1/events (the route reads forward only: strictly after `since`, oldest first). */
function readEvents(since, limit) {
  const params = new URLSearchParams({ limit: String(limit) });
  if (log.type) params.set('type', log.type);
  if (since) params.set('since', since);
  return api('GET', `/api/v1/events?${params}`);
}

function showLogRows(events) {
  $('log').replaceChildren(...events.map((e) => {
    const tr = el('tr', undefined, { 'data-event': e.id });
    const open = el('button', e.id, { type: 'button', class: 'link', 'aria-label': `Details of ${e.id}` });
    open.onclick = () => act(() => showEventDetail(e.id));
    const idCell = el('td');
    idCell.append(open);
    const data = JSON.stringify(e.data);
    tr.append(el('td', new Date(e.created_at).toLocaleString()), el('td', e.type), idCell, el('td', data.length > 80 ? `${data.slice(0, 79)}…` : data, { class: 'data' }));
    return tr;
  }));
  if (events.length === 0) $('log').replaceChildren(emptyRow('No events here.', 4));
  $('log-order-label').textContent = log.newestFirst ? 'Events, newest first' : 'Events, oldest first';
}

function showLogPage(index) {
  return log.newestFirst ? showNewestPage(index) : showOldestPage(index);
}

async function showOldestPage(index) {
  const page = await readEvents(log.pages[index], log.limit);
  log.at = index;
  if (page.cursor && page.events.length > 0) log.pages[index + 1] = page.cursor;
  log.pages.length = Math.min(log.pages.length, index + 2);
  showLogRows(page.events);
  $('log-page').textContent = `· page ${index + 1}${log.type ? ` · ${log.type}` : ''}`;
  const full = page.events.length === log.limit;
  $('log-next').disabled = !full;
  $('log-prev').disabled = index === 0;
  $('log-first').disabled = index === 0;
  $('log-end').textContent = full ? '' : 'End of the log for now.';
}

/*
 * Newest first. The route has no backward read, so the dashboard reads the log
 * forward once, TAIL_BATCH events a request, and keeps the `since` cursor where
 * each batch starts (`marks[i]` reads events i*TAIL_BATCH onwards; marks[0] is
 * "from the oldest"). A page of newest-first is then one read, from the mark at
 * or before its oldest event (TAIL_BATCH + the largest page size stays within
 * the route's limit of 500). "Show" and "First page" continue the scan from its
 * last mark, so only new events are read again. A read that no longer lines up
 * (history expired under a mark, or from the oldest) starts the scan over.
 */
const TAIL_BATCH = 400;
const tail = { type: null, marks: [undefined], count: 0, firstId: null };

function restartTail() {
  Object.assign(tail, { type: log.type, marks: [undefined], count: 0, firstId: null });
}

/** Reads forward from the last mark to the end of the log (for now): `tail.count` events, their marks. */
async function scanTail() {
  if (tail.type !== log.type) restartTail();
  let told = false;
  for (;;) {
    const i = tail.marks.length - 1;
    let page;
    try {
      page = await readEvents(tail.marks[i], TAIL_BATCH);
    } catch (err) {
      if (err.status !== 410 || i === 0) throw err;
      restartTail(); // the mark's events expired
      continue;
    }
    if (i === 0) {
      if (tail.firstId !== null && page.events[0]?.id !== tail.firstId) {
        restartTail(); // the oldest events expired: every index moved
        continue;
      }
      tail.firstId = page.events[0]?.id ?? null;
    }
    tail.count = i * TAIL_BATCH + page.events.length;
    if (page.events.length < TAIL_BATCH) break;
    tail.marks.push(page.cursor);
    say(`Reading the log for newest first: ${tail.count} events so far…`);
    told = true;
  }
  if (told) say('');
}

/** Events [count - (index+1)*limit, count - index*limit), newest first; null when the log no longer lines up with the marks. */
async function readTailPage(index) {
  const end = tail.count - index * log.limit;
  if (end <= 0) return [];
  const start = Math.max(0, end - log.limit);
  const b = Math.floor(start / TAIL_BATCH);
  let page;
  try {
    page = await readEvents(tail.marks[b], end - b * TAIL_BATCH);
  } catch (err) {
    if (err.status === 410) return null; // the mark's events expired
    throw err;
  }
  if (page.events.length < end - b * TAIL_BATCH || (b === 0 && page.events[0]?.id !== tail.firstId)) return null;
  return page.events.slice(start - b * TAIL_BATCH).reverse();
}

async function showNewestPage(index) {
  if (index === 0) await scanTail();
  let events = await readTailPage(index);
  if (events === null) {
    restartTail();
    await scanTail();
    index = 0;
    events = (await readTailPage(0)) ?? [];
  }
  log.at = index;
  showLogRows(events);
  const pages = Math.max(1, Math.ceil(tail.count / log.limit));
  $('log-page').textContent = `· page ${index + 1} of ${pages} · ${tail.count} event${tail.count === 1 ? '' : 's'}${log.type ? ` · ${log.type}` : ''}`;
  const oldestShown = (index + 1) * log.limit >= tail.count;
  $('log-next').disabled = oldestShown;
  $('log-prev').disabled = index === 0;
  $('log-first').disabled = false; // the newest page, read again with what came since
  $('log-end').textContent = oldestShown ? 'Start of the log: its oldest event.' : '';
}

function emptyRow(text, columns) {
  const tr = el('tr');
  tr.append(el('td', text, { colspan: String(columns) }));
  return tr;
}

function fact(list, term, value) {
  list.append(el('dt', term), el('dd', value));
}

async function showEventDetail(id) {
  const res = await api('GET', `/api/v1/events/${encodeURIComponent(id)}/deliveries`);
  const e = res.event;
  $('event-title').textContent = `Event ${e.id}`;
  const facts = $('event-facts');
  facts.replaceChildren();
  fact(facts, 'Type', e.type);
  fact(facts, 'Created', new Date(e.created_at).toLocaleString());
  if (e.occurred_at) fact(facts, 'Occurred', new Date(e.occurred_at).toLocaleString());
  fact(facts, 'Cursor', e.cursor);
  $('event-data').textContent = JSON.stringify(e.data, null, 2);
  const blocks = res.deliveries.map((d) => {
    const box = el('article', undefined, { class: 'delivery', 'data-delivery': d.id });
    const state = d.state === 'pending' && d.attempts_made > 0 ? 'retrying' : d.state;
    const head = el('h5');
    head.append(el('span', d.url ?? `${d.webhook_id} (deleted)`), ' ', el('span', state, { class: `badge ${state}` }));
    if (d.trigger && d.trigger !== 'event') head.append(' ', el('span', d.trigger, { class: 'badge trigger' }));
    const table = el('table', undefined, { class: 'attempts' });
    const thead = el('thead');
    const hr = el('tr');
    for (const h of ['#', 'When', 'Status', 'Outcome', 'Duration', 'Error', 'Next attempt']) hr.append(el('th', h, { scope: 'col' }));
    thead.append(hr);
    const body = el('tbody');
    for (const a of d.attempts) {
      const tr = el('tr', undefined, { 'data-attempt': a.id });
      tr.append(
        el('td', String(a.attempt)),
        el('td', new Date(a.at).toLocaleString()),
        el('td', a.status === null ? '—' : String(a.status), { class: `status ${a.outcome === 'ok' ? 'succeeded' : a.next_attempt_at ? 'retrying' : 'failed'}` }),
        el('td', a.outcome),
        el('td', `${a.duration_ms} ms`),
        el('td', a.error ?? ''),
        el('td', a.next_attempt_at ? new Date(a.next_attempt_at).toLocaleString() : a.given_up ? 'given up' : '—'),
      );
      body.append(tr);
    }
    if (d.attempts.length === 0) body.append(emptyRow('Not attempted yet.', 7));
    table.append(thead, body);
    const note = el('p', `Delivery ${d.id} · ${d.attempts_made} attempt${d.attempts_made === 1 ? '' : 's'} `, { class: 'note' });
    if (d.url) note.append(resendButton(e.id, d));
    box.append(head, note, table);
    return box;
  });
  if (res.truncated) blocks.push(el('p', 'Only the oldest deliveries and attempts are shown.', { class: 'note' }));
  $('event-deliveries').replaceChildren(...(blocks.length > 0 ? blocks : [el('p', 'No deliveries: no subscription took this event.')]));
  $('event-detail').hidden = false;
  history.replaceState(null, '', `#event=${e.id}`);
  $('event-detail').scrollIntoView({ block: 'nearest' });
}

function closeEventDetail() {
  $('event-detail').hidden = true;
  history.replaceState(null, '', location.pathname);
}

// Secret rotation: the new secret is shown where a new webhook's is; the old one
// keeps signing for the API's default grace period (24 h), so there is time to switch.
function rotateButton(hook) {
  const button = el('button', 'Rotate secret', { type: 'button', class: 'secondary', 'aria-label': `Rotate the signing secret of ${hook.url}` });
  button.onclick = () => act(async () => {
    const res = await api('POST', `/api/v1/webhooks/${hook.id}/secret/rotate`, {});
    showSecret(`New signing secret of ${hook.url}:`, res.secret);
    const until = res.previous_secret_expires_at ? new Date(res.previous_secret_expires_at).toLocaleString() : null;
    say(`New signing secret for ${hook.url}. ${until ? `The old one also signs deliveries until ${until}.` : 'The old one no longer signs anything.'}`);
  });
  return button;
}

// Resend and recover (POST …/resend, …/recover): each click is one request with its own
// Idempotency-Key, so a click the network retries is not queued twice.
function idempotencyKey() {
  return crypto.randomUUID();
}

// A double click is one resend: the button is off while its request runs (two requests
// with two keys would be two resends, as the API promises for two calls).
function once(button, fn) {
  if (button.disabled) return;
  button.disabled = true;
  return act(fn).finally(() => {
    button.disabled = false;
  });
}

async function operation(path, body) {
  const headers = { accept: 'application/json', authorization: `Bearer ${token}`, 'idempotency-key': idempotencyKey() };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(path, { method: 'POST', headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const data = await res.json().catch(() => null);
  if (!res.ok) throw new Error(data?.error?.message ?? `HTTP ${res.status}`);
  return data;
}

function resendButton(eventId, d) {
  const button = el('button', 'Resend', { type: 'button', class: 'secondary', 'aria-label': `Resend delivery ${d.id}` });
  button.onclick = () => once(button, async () => {
    const res = await operation(`/api/v1/webhooks/${d.webhook_id}/deliveries/${d.id}/resend`);
    say(`Delivery resent as ${res.delivery_id}.`);
    await showEventDetail(eventId);
  });
  return button;
}

/**
 * Sends again what failed for good among the deliveries of the last 3 days
 * (POST …/recover): the retry schedule runs for more than a day, so a
 * delivery given up just now was created a day and more ago.
 */
const RECOVER_DAYS = 3;
function recoverButton(hook) {
  const button = el('button', 'Recover', { type: 'button', class: 'secondary', 'aria-label': `Recover failed deliveries of ${hook.url}` });
  button.onclick = () => once(button, async () => {
    const res = await operation(`/api/v1/webhooks/${hook.id}/recover`, { since: new Date(Date.now() - RECOVER_DAYS * 24 * 3600 * 1000).toISOString() });
    say(`${res.queued} failed deliver${res.queued === 1 ? 'y' : 'ies'} of the last ${RECOVER_DAYS} days queued again${res.truncated ? ' (more remain: recover again)' : ''}.`);
  });
  return button;
}

async function showAttempts(hook) {
  const res = await api('GET', `/api/v1/webhooks/${hook.id}/deliveries`);
  const list = res.attempts ?? res.deliveries ?? [];
  $('attempts-title').textContent = `Recent attempts: ${hook.url}`;
  $('attempts').replaceChildren(...list.map((a) => {
    const via = a.trigger && a.trigger !== 'event' ? ` · ${a.trigger}` : '';
    const li = el('li', `${new Date(a.at ?? a.created_at).toLocaleString()} · attempt ${a.attempt} · ${a.status ?? a.outcome} · ${a.duration_ms} ms${via} · `);
    const open = el('button', a.event_id, { type: 'button', class: 'link', 'aria-label': `Details of ${a.event_id}` });
    open.onclick = () => act(() => showEventDetail(a.event_id));
    li.append(open);
    return li;
  }));
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
/** "Name: value" lines into a headers object; the API names any header it refuses. */
function parseHeaderLines(text) {
  const headers = {};
  for (const line of text.split('\n').map((l) => l.trim()).filter(Boolean)) {
    const colon = line.indexOf(':');
    if (colon <= 0) throw new Error(`Custom headers: "${line}" is not of the form Name: value`);
    headers[line.slice(0, colon).trim()] = line.slice(colon + 1).trim();
  }
  return headers;
}
$('hook-form').addEventListener('submit', (e) => {
  e.preventDefault();
  act(async () => {
    const form = new FormData(e.target);
    const events = String(form.get('events') || '*').split(',').map((s) => s.trim()).filter(Boolean);
    const description = String(form.get('description') || '');
    const headers = parseHeaderLines(String(form.get('headers') || ''));
    const ordering = form.get('fifo') ? { ordering: 'fifo' } : {};
    const hook = await api('POST', '/api/v1/webhooks', { url: String(form.get('url')), events, ...(description ? { description } : {}), ...(Object.keys(headers).length > 0 ? { headers } : {}), ...ordering });
    showSecret('Signing secret (shown here and by Show secret):', hook.secret);
    e.target.reset();
    say('Webhook added.');
    await loadHooks();
  });
});
for (const b of document.querySelectorAll('[data-window]')) b.addEventListener('click', () => act(() => setWindow(b.dataset.window)));
$('activity-refresh').addEventListener('click', () => act(loadActivity));
for (const type of EVENT_TYPES) $('log-type').append(el('option', type, { value: type }));
$('log-form').addEventListener('submit', (e) => {
  e.preventDefault();
  act(() => {
    log.type = $('log-type').value;
    log.limit = Number($('log-limit').value);
    log.newestFirst = $('log-order').value === 'newest';
    log.pages = [undefined];
    return showLogPage(0);
  });
});
$('log-first').addEventListener('click', () => act(() => showLogPage(0)));
$('log-prev').addEventListener('click', () => act(() => showLogPage(Math.max(0, log.at - 1))));
$('log-next').addEventListener('click', () => act(() => showLogPage(log.at + 1)));
$('event-close').addEventListener('click', closeEventDetail);
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
