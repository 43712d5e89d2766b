import { existsSync, mkdirSync } from 'node:fs';
import { expect } from 'chai';
import { MongoClient } from 'mongodb';
import { chromium, type Browser, type Page } from 'playwright-core';
import type { RunningApi } from '../src/server.js';
import type { DeliveryDoc } from '#shared/mongo/index.js';
import { atFileEnd } from '#test-support/cleanup.js';
import { baseTestEnv } from '#test-support/env.js';
import { Receiver } from '#test-support/receiver.js';
import { ActivityDb, MIN } from './support/activity.js';
import { bearer, createAccount, type TestAccount } from './support/accounts.js';
import { call } from './support/api.js';
import { eventually } from './support/events.js';
import { webhookApi, webhookTestEnv } from './support/webhooks.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const ARTIFACTS = 'test-artifacts';
/**
 * Where the views' screenshots go: test-artifacts/screenshots on every run;
 * docs/screenshots (the pictures docs/dashboard.md shows) when
 * UPDATE_SCREENSHOTS=1: `UPDATE_SCREENSHOTS=1 npm test -- api/test/dashboard-browser.test.ts`.
 */
const SHOTS = process.env.UPDATE_SCREENSHOTS === '1' ? 'docs/screenshots' : `${ARTIFACTS}/screenshots`;
/** The README's picture of the whole dashboard: docs/dashboard.png when UPDATE_SCREENSHOTS=1. */
const README_SHOT = process.env.UPDATE_SCREENSHOTS === '1' ? 'docs/dashboard.png' : `${ARTIFACTS}/screenshots/dashboard.png`;
const CHROMIUM_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

/**
 * The dashboard end to end in headless Chromium (Debian's package). `npm test`
 * installs it when missing (as root, through apt-get) or stops with the command
 * that installs it; these tests never skip.
 */
describe('dashboard in a real browser', function () {
  this.timeout(60_000);
  let api: RunningApi;
  let browser: Browser;
  let page: Page;
  let receiver: Receiver;

  before(async function () {
    // `npm test` installs Chromium when it is missing (scripts/infra/chromium.mjs); without it this fails, never skips.
    if (!existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM}: apt-get install -y chromium, or set CHROMIUM_PATH`);
    // The webhook tests' API allows private targets, so the page can add a local receiver.
    ({ api } = await webhookApi());
    receiver = await Receiver.start();
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    page = await browser.newPage();
  });

  after(async () => {
    await browser?.close();
    await receiver?.close();
  });

  it('signs up, creates an API key shown once, then only its preview', async () => {
    await page.goto(`${api.url}/dashboard`);
    const email = `ui-${Date.now()}@example.com`;
    const signup = page.locator('#signup-form');
    await signup.getByLabel('Name').fill('UI Tester');
    await signup.getByLabel('Email').fill(email);
    await signup.getByLabel('Password').fill('correct horse battery');
    await signup.getByRole('button', { name: 'Sign up' }).click();
    await expect(page.locator('#whoami')).to.exist;
    await page.locator('#app').waitFor({ state: 'visible' });
    expect(await page.locator('#whoami').textContent()).to.include(email);
    expect(await page.locator('#key-preview').textContent()).to.equal('none');

    await page.getByRole('button', { name: 'Create or rotate key' }).click();
    await page.locator('#key-reveal').waitFor({ state: 'visible' });
    const raw = (await page.locator('#key-raw').textContent()) ?? '';
    expect(raw).to.match(/^svc_[A-Za-z0-9_-]{20,}$/);
    const preview = await page.locator('#key-preview').textContent();
    expect(preview).to.equal(`svc_…${raw.slice(-8)}`);

    // A reload shows only the preview: the raw key is gone for good.
    await page.reload();
    await page.locator('#app').waitFor({ state: 'visible' });
    expect(await page.locator('#key-preview').textContent()).to.equal(preview);
    expect(await page.locator('#key-reveal').isVisible()).to.equal(false);
    expect(await page.content()).to.not.include(raw);

    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: `${ARTIFACTS}/dashboard.png`, fullPage: true });
  });

  it('adds a webhook, pings it, sees the ping in the live feed, disables and enables it, and deletes it', async () => {
    const url = receiver.url('/ui-hook');
    await page.getByRole('button', { name: 'Start live feed' }).click();
    await page.locator('#feed-state', { hasText: 'live' }).waitFor();
    const form = page.locator('#hook-form');
    await form.getByLabel('HTTPS URL').fill(url);
    await form.getByLabel('Description').fill('UI test receiver');
    await form.getByLabel('Custom headers').fill('X-Ui-Key: ui-secret-value\nX-Tenant: t1');
    await form.getByLabel('Ordered delivery (FIFO)').check();
    await form.getByRole('button', { name: 'Add webhook' }).click();
    await page.locator('#hook-secret').waitFor({ state: 'visible' });
    expect(await page.locator('#hook-secret-value').textContent()).to.match(/^whsec_/);
    const row = page.locator('#hooks tr', { hasText: url });
    await row.waitFor();
    expect(await row.locator('td').nth(1).textContent()).to.equal('*');
    // The custom headers are shown masked, never their values (the API stored them: webhooks-headers.test.ts sends them).
    // Ordered delivery was asked for: the row says so (the API stored it: enabledOf's list below shows it too).
    expect(await row.locator('td').nth(0).textContent()).to.equal(`${url}Headers: X-Ui-Key: ****, X-Tenant: ****Ordered (FIFO): one at a time, in log order`);
    expect(await page.content()).not.to.include('ui-secret-value');

    await row.getByRole('button', { name: `Ping ${url}` }).click();
    // The ping goes through the event log, so the live feed (SSE) shows it.
    await page.locator('#feed li', { hasText: 'webhook.ping' }).waitFor({ timeout: 20_000 });
    await page.screenshot({ path: `${ARTIFACTS}/dashboard.png`, fullPage: true });

    // Disable and enable again (PATCH); the state shows in the row and in the API.
    const enabledOf = (): Promise<boolean> =>
      page.evaluate(async (u) => {
        const res = await fetch('/api/v1/webhooks', { headers: { authorization: `Bearer ${(globalThis as unknown as { sessionStorage: { getItem(k: string): string | null } }).sessionStorage.getItem('svc_session')}` } });
        return ((await res.json()) as { webhooks: { url: string; enabled: boolean }[] }).webhooks.find((w) => w.url === u)!.enabled;
      }, url);
    const orderingOf = (): Promise<string> =>
      page.evaluate(async (u) => {
        const res = await fetch('/api/v1/webhooks', { headers: { authorization: `Bearer ${(globalThis as unknown as { sessionStorage: { getItem(k: string): string | null } }).sessionStorage.getItem('svc_session')}` } });
        return ((await res.json()) as { webhooks: { url: string; ordering: string }[] }).webhooks.find((w) => w.url === u)!.ordering;
      }, url);
    expect(await orderingOf()).to.equal('fifo');
    await row.getByRole('button', { name: `Disable ${url}` }).click();
    await row.getByRole('button', { name: `Enable ${url}` }).waitFor();
    expect(await row.locator('td').nth(2).textContent()).to.match(/disabled$/);
    expect(await enabledOf()).to.equal(false);
    await row.getByRole('button', { name: `Enable ${url}` }).click();
    await row.getByRole('button', { name: `Disable ${url}` }).waitFor();
    expect(await row.locator('td').nth(2).textContent()).to.not.match(/disabled/);
    expect(await enabledOf()).to.equal(true);

    // Disabled by the delivery process (every attempt failed for the period): the row says why.
    const client = new MongoClient(baseTestEnv().MONGO_URL!, { retryWrites: false });
    atFileEnd(() => client.close());
    await client
      .db(webhookTestEnv().MONGO_DB)
      .collection<{ url: string }>('webhooks')
      .updateOne({ url }, { $set: { enabled: false, disabled_reason: 'endpoint_failing', disabled_at: new Date() } });
    // A ping reloads the list a moment later.
    await row.getByRole('button', { name: `Ping ${url}` }).click();
    await row.getByRole('button', { name: `Enable ${url}` }).waitFor();
    expect(await row.locator('td').nth(2).textContent()).to.match(/disabled: endpoint failing \(since /);
    await row.getByRole('button', { name: `Enable ${url}` }).click();
    await row.getByRole('button', { name: `Disable ${url}` }).waitFor();
    expect(await row.locator('td').nth(2).textContent()).to.not.match(/disabled/);

    await row.getByRole('button', { name: `Delete ${url}` }).click();
    await row.waitFor({ state: 'detached' });
    await page.getByRole('button', { name: 'Stop live feed' }).click();
  });

  it('shows a readable error for a bad login', async () => {
    await page.getByRole('button', { name: 'Log out' }).click();
    const login = page.locator('#login-form');
    await login.getByLabel('Email').fill('nobody@example.com');
    await login.getByLabel('Password').fill('wrong password');
    await login.getByRole('button', { name: 'Log in' }).click();
    await page.locator('#status.error').waitFor();
    expect(await page.locator('#status').textContent()).to.match(/invalid|incorrect|wrong/i);
  });
});

/**
 * The views that show delivery activity and the event log, on an account
 * whose attempts are known: written straight into the collection the
 * delivery process writes, so every number on screen is predictable.
 */
describe('dashboard views in a real browser: delivery activity, event log, event detail', function () {
  this.timeout(90_000);
  let api: RunningApi;
  let browser: Browser;
  let page: Page;
  let db: ActivityDb;
  let store: ReturnType<MongoClient['db']>;
  let acct: TestAccount;
  let hook: { id: string; url: string; secret: string };
  let events: { id: string; type: string }[];
  const cspViolations: string[] = [];
  /**
   * Every error the browser console shows (a resource that fails to load, the favicon the browser
   * asks for by itself among them: those are not page responses), and every page response that failed.
   */
  const consoleErrors: string[] = [];

  const ingest = async (batch: { type: string; data: Record<string, unknown> }[]): Promise<{ id: string; type: string }[]> => {
    const res = await call(api.url, 'POST', '/internal/v1/events', { headers: bearer(api.deps.config.ingestToken), body: { events: batch.map((e) => ({ account_id: acct.userId, ...e })) } });
    expect(res.status, JSON.stringify(res.body)).to.equal(202);
    return res.body.events.map((e: { id: string }, i: number) => ({ id: e.id, type: batch[i]!.type }));
  };

  before(async function () {
    this.timeout(120_000);
    if (!existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM}: apt-get install -y chromium, or set CHROMIUM_PATH`);
    ({ api } = await webhookApi());
    const client = new MongoClient(baseTestEnv().MONGO_URL!, { retryWrites: false });
    atFileEnd(() => client.close());
    store = client.db(webhookTestEnv().MONGO_DB);
    db = new ActivityDb(store);
    acct = await createAccount(api.url, { name: 'Dana Dashboard' });
    // Subscribed to a type the events below are not, so no delivery process adds attempts of its own.
    const created = await call(api.url, 'POST', '/api/v1/webhooks', { headers: bearer(acct.apiKey), body: { url: 'https://127.0.0.1:8443/hooks/orders', events: ['call.takeover'], description: 'orders' } });
    expect(created.status).to.equal(201);
    hook = created.body;
    const now = Date.now();
    const at = (minutesAgo: number): Date => new Date(now - minutesAgo * MIN);
    const base = { subscription: hook.id, account: acct.userId };
    await db.attempt({ ...base, at: at(1), outcome: 'ok', status: 200, ms: 100 });
    await db.attempt({ ...base, at: at(1), outcome: 'ok', status: 200, ms: 120 });
    await db.attempt({ ...base, at: at(17), outcome: 'ok', status: 204, ms: 300 });
    await db.attempt({ ...base, at: at(31), outcome: 'http_5xx', status: 503, ms: 2000, retry: true });
    await db.attempt({ ...base, at: at(44), outcome: 'timeout', status: null, ms: 50 });
    await db.attempt({ ...base, at: at(180), outcome: 'ok', status: 200, ms: 210 }); // in the day, not the hour

    events = await ingest([
      ...Array.from({ length: 12 }, (_, i) => ({ type: 'call.started', data: { call_id: `c-${i + 1}` } })),
      ...Array.from({ length: 3 }, (_, i) => ({ type: 'message.sent', data: { message_id: `m-${i + 1}`, to: '+15550100' } })),
    ]);
    const last = events[events.length - 1]!.id;
    await eventually(async () => ((await call(api.url, 'GET', '/api/v1/events?limit=500', { headers: bearer(acct.apiKey) })).body.events?.some((e: { id: string }) => e.id === last) ? true : undefined), 30_000, 100);

    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    page = await browser.newPage({ viewport: { width: 1100, height: 900 } });
    page.on('console', (m) => {
      if (m.type() === 'error') consoleErrors.push(`${m.text()} (${m.location().url})`);
    });
    page.on('response', (res) => {
      if (res.status() >= 400) consoleErrors.push(`${res.status()} ${res.request().method()} ${res.url()}`);
    });
    // Every refusal of the page's content security policy, on every load, is reported here (the last test expects none).
    await page.exposeFunction('reportCspViolation', (directive: string) => cspViolations.push(directive));
    await page.addInitScript(() => {
      const w = globalThis as unknown as { reportCspViolation(d: string): void; document: { addEventListener(t: string, f: (e: { violatedDirective: string }) => void): void } };
      w.document.addEventListener('securitypolicyviolation', (e) => w.reportCspViolation(e.violatedDirective));
    });
    await page.goto(`${api.url}/dashboard`);
    const login = page.locator('#login-form');
    await login.getByLabel('Email').fill(acct.email);
    await login.getByLabel('Password').fill(acct.password);
    await login.getByRole('button', { name: 'Log in' }).click();
    await page.locator('#app').waitFor({ state: 'visible' });
    mkdirSync(SHOTS, { recursive: true });
  });

  after(async () => {
    await browser?.close();
  });

  it('shows per subscription the last hour as a chart with the known counts and p50/p99, and the last day on a click', async () => {
    const card = page.locator(`#activity .card[data-hook="${hook.id}"]`);
    await card.waitFor();
    expect(await card.locator('h3').textContent()).to.equal(hook.url);
    expect(await card.locator('.count.succeeded').textContent()).to.equal('3 succeeded');
    expect(await card.locator('.count.retrying').textContent()).to.equal('1 retrying');
    expect(await card.locator('.count.failed').textContent()).to.equal('1 failed');
    // Durations 50, 100, 120, 300, 2000 ms: nearest rank p50 is the 3rd, p99 the 5th.
    expect(await card.locator('.p50').textContent()).to.equal('p50 120 ms');
    expect(await card.locator('.p99').textContent()).to.equal('p99 2000 ms');

    const chart = card.locator('svg.chart');
    expect(await chart.getAttribute('aria-label')).to.equal('3 succeeded, 1 retrying, 1 failed, last hour');
    const buckets = chart.locator('g.bucket');
    expect(await buckets.count()).to.equal(12);
    const sums = await buckets.evaluateAll((gs) =>
      gs.reduce((n, g) => ({ succeeded: n.succeeded + Number(g.getAttribute('data-succeeded')), retrying: n.retrying + Number(g.getAttribute('data-retrying')), failed: n.failed + Number(g.getAttribute('data-failed')) }), { succeeded: 0, retrying: 0, failed: 0 }),
    );
    expect(sums).to.deep.equal({ succeeded: 3, retrying: 1, failed: 1 });
    // The two attempts of a minute ago share a bucket: one bar of height 2 units, and its tooltip says so.
    const both = chart.locator('g.bucket[data-succeeded="2"]');
    expect(await both.count()).to.equal(1);
    expect(await both.locator('title').textContent()).to.match(/: 2 succeeded, 0 retrying, 0 failed$/);
    expect(await chart.locator('rect.bar.succeeded').count()).to.equal(2);
    expect(await chart.locator('rect.bar.retrying').count()).to.equal(1);
    expect(await chart.locator('rect.bar.failed').count()).to.equal(1);
    const tallest = await both.locator('rect.bar').getAttribute('height');
    const single = await chart.locator('g.bucket[data-succeeded="1"] rect.bar.succeeded').getAttribute('height');
    expect(Number(tallest)).to.be.closeTo(2 * Number(single), 0.01);
    await page.locator('#activity-section').screenshot({ path: `${SHOTS}/activity-hour.png` });

    await page.getByRole('button', { name: 'Last day' }).click();
    await card.locator('svg.chart[aria-label$="last day"]').waitFor();
    expect(await page.getByRole('button', { name: 'Last day' }).getAttribute('aria-pressed')).to.equal('true');
    expect(await card.locator('.count.succeeded').textContent()).to.equal('4 succeeded');
    expect(await card.locator('svg.chart').getAttribute('aria-label')).to.equal('4 succeeded, 1 retrying, 1 failed, last day');
    expect(await card.locator('.p50').textContent()).to.equal('p50 120 ms');
    await page.locator('#activity-section').screenshot({ path: `${SHOTS}/activity-day.png` });
    await page.getByRole('button', { name: 'Last hour' }).click();
    await card.locator('svg.chart[aria-label$="last hour"]').waitFor();
    expect(await card.locator('svg.chart g.bucket').count()).to.equal(12);
  });

  it('has a button for each webhook operation that exists, Show secret among them', async () => {
    const row = page.locator('#hooks tr', { hasText: hook.url });
    for (const name of [`Ping ${hook.url}`, `Recent attempts for ${hook.url}`, `Disable ${hook.url}`, `Recover failed deliveries of ${hook.url}`, `Show the signing secret of ${hook.url}`, `Delete ${hook.url}`]) {
      expect(await row.getByRole('button', { name }).count(), name).to.equal(1);
    }
    await row.getByRole('button', { name: `Show the signing secret of ${hook.url}` }).click();
    await page.locator('#hook-secret').waitFor({ state: 'visible' });
    expect(await page.locator('#hook-secret-value').textContent()).to.equal(hook.secret);
    expect(await page.locator('#hook-secret-title').textContent()).to.include(hook.url);
    await page.locator('#hooks-section').screenshot({ path: `${SHOTS}/webhooks.png` });
  });

  it('pages through the event log by cursor and filters it by type', async () => {
    const ids = async (): Promise<string[]> => page.locator('#log tr[data-event]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-event')!));
    const form = page.locator('#log-form');
    await form.getByLabel('Per page').selectOption('10');
    await form.getByRole('button', { name: 'Show' }).click();
    await page.locator('#log-page', { hasText: 'page 1' }).waitFor();
    await eventually(async () => ((await ids()).length === 10 ? true : undefined));
    const first = await ids();
    expect(first).to.deep.equal(events.slice(0, 10).map((e) => e.id));
    expect(await page.getByRole('button', { name: 'Previous page' }).isDisabled()).to.equal(true);
    await page.locator('#log-section').screenshot({ path: `${SHOTS}/event-log.png` });

    await page.getByRole('button', { name: 'Next page' }).click();
    await page.locator('#log-page', { hasText: 'page 2' }).waitFor();
    expect(await ids()).to.deep.equal(events.slice(10).map((e) => e.id));
    expect(await page.locator('#log-end').textContent()).to.equal('End of the log for now.');
    expect(await page.getByRole('button', { name: 'Next page' }).isDisabled()).to.equal(true);

    await page.getByRole('button', { name: 'Previous page' }).click();
    await page.locator('#log-page', { hasText: 'page 1' }).waitFor();
    expect(await ids()).to.deep.equal(first);

    await form.getByLabel('Type').selectOption('message.sent');
    await form.getByRole('button', { name: 'Show' }).click();
    await page.locator('#log-page', { hasText: 'message.sent' }).waitFor();
    expect(await ids()).to.deep.equal(events.filter((e) => e.type === 'message.sent').map((e) => e.id));
    const types = await page.locator('#log tr[data-event] td:nth-child(2)').allTextContents();
    expect(types).to.deep.equal(['message.sent', 'message.sent', 'message.sent']);
  });

  it('opens one event: its data, its delivery and each attempt with status code, outcome and duration; a link to it opens it again', async () => {
    const event = events.find((e) => e.type === 'message.sent')!;
    const t0 = new Date(Date.now() - 10 * MIN);
    const dlv = await db.delivery({ subscription: hook.id, account: acct.userId, event: event.id, state: 'succeeded', attempts: 2, lastStatus: 200, createdAt: t0 });
    await db.attempt({ subscription: hook.id, account: acct.userId, event: event.id, delivery: dlv._id, at: new Date(t0.getTime() + 1000), outcome: 'http_5xx', status: 502, ms: 1234, retry: true, attempt: 1 });
    await db.attempt({ subscription: hook.id, account: acct.userId, event: event.id, delivery: dlv._id, at: new Date(t0.getTime() + MIN), outcome: 'ok', status: 200, ms: 87, attempt: 2 });

    await page.getByRole('button', { name: `Details of ${event.id}` }).click();
    const detail = page.locator('#event-detail');
    await detail.waitFor({ state: 'visible' });
    expect(await page.locator('#event-title').textContent()).to.equal(`Event ${event.id}`);
    expect(JSON.parse((await page.locator('#event-data').textContent())!)).to.deep.equal({ message_id: 'm-1', to: '+15550100' });
    const delivery = detail.locator(`article.delivery[data-delivery="${dlv._id}"]`);
    expect(await delivery.locator('h5').textContent()).to.equal(`${hook.url} succeeded`);
    const rows = delivery.locator('tbody tr');
    expect(await rows.count()).to.equal(2);
    const cells = async (i: number): Promise<string[]> => rows.nth(i).locator('td').allTextContents();
    const [one, two] = [await cells(0), await cells(1)];
    expect([one[0], one[2], one[3], one[4]]).to.deep.equal(['1', '502', 'http_5xx', '1234 ms']);
    expect([two[0], two[2], two[3], two[4], two[6]]).to.deep.equal(['2', '200', 'ok', '87 ms', '—']);
    await page.locator('#log-section').screenshot({ path: `${SHOTS}/event-detail.png` });
    expect(new URL(page.url()).hash).to.equal(`#event=${event.id}`);

    // The address is a link to this view: a reload opens the same event.
    await page.reload();
    await detail.waitFor({ state: 'visible' });
    expect(await page.locator('#event-title').textContent()).to.equal(`Event ${event.id}`);
    expect(await detail.locator('td.status').allTextContents()).to.deep.equal(['502', '200']);
    await page.getByRole('button', { name: 'Close' }).click();
    await detail.waitFor({ state: 'hidden' });
    expect(new URL(page.url()).hash).to.equal('');
    await page.screenshot({ path: `${SHOTS}/overview.png`, fullPage: true });
    await page.screenshot({ path: README_SHOT, fullPage: true });
  });

  it('resends a delivery from the event detail (a new delivery marked resend appears) and recovers a subscription from its row', async () => {
    const event = events.filter((e) => e.type === 'message.sent')[1]!; // the log shows message.sent now
    const t0 = new Date(Date.now() - 5 * MIN);
    const dlv = await db.delivery({ subscription: hook.id, account: acct.userId, event: event.id, state: 'failed', attempts: 1, lastStatus: 500, createdAt: t0 });
    await db.attempt({ subscription: hook.id, account: acct.userId, event: event.id, delivery: dlv._id, at: new Date(t0.getTime() + 1000), outcome: 'http_5xx', status: 500, ms: 40, attempt: 1 });
    await page.getByRole('button', { name: `Details of ${event.id}` }).click();
    const detail = page.locator('#event-detail');
    await detail.waitFor({ state: 'visible' });
    // A double click is one resend (the button is off while its request runs).
    await detail.getByRole('button', { name: `Resend delivery ${dlv._id}` }).dblclick();
    await page.locator('#status', { hasText: 'Delivery resent as dlv_' }).waitFor();
    await new Promise((r) => setTimeout(r, 500));
    expect(await store.collection<DeliveryDoc>('deliveries').countDocuments({ origin_delivery_id: dlv._id, trigger: 'resend' }), 'resends queued by a double click').to.equal(1);
    const resentId = (await page.locator('#status').textContent())!.match(/dlv_[0-9a-f]{24}/)![0];
    const resent = detail.locator(`article.delivery[data-delivery="${resentId}"]`);
    await resent.waitFor();
    expect(await resent.locator('.badge.trigger').textContent()).to.equal('resend');
    const stored = await store.collection<DeliveryDoc>('deliveries').findOne({ _id: resentId });
    expect(stored).to.include({ trigger: 'resend', origin_delivery_id: dlv._id, subscription_id: hook.id, event_id: event.id });
    await page.getByRole('button', { name: 'Close' }).click();

    // Recover: what it queued (0 while the resend is on its way, 1 if a delivery process in this run already gave it up) is what it says.
    const row = page.locator('#hooks tr', { hasText: hook.url });
    await row.getByRole('button', { name: `Recover failed deliveries of ${hook.url}` }).click();
    await page.locator('#status', { hasText: 'of the last 3 days queued again' }).waitFor();
    const said = Number((await page.locator('#status').textContent())!.match(/^(\d+) failed deliver/)![1]);
    expect(said).to.equal(await store.collection<DeliveryDoc>('deliveries').countDocuments({ subscription_id: hook.id, trigger: 'recover' }));
  });

  it('shows the user id (the account id `npm run emit -- --account` takes), in the account section and the live feed hint', async () => {
    expect(await page.locator('#user-id').textContent()).to.equal(acct.userId);
    expect(await page.locator('#emit-hint').textContent()).to.equal(`npm run emit -- --account ${acct.userId} --type random --count 10`);
  });

  it('shows the event log newest first: the newest page, older pages through the batch marks, new events on First page, the type filter', async () => {
    const ids = async (): Promise<string[]> => page.locator('#log tr[data-event]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-event')!));
    // 500 more events: 515 in all, so the scan reads two batches of 400 and the pages read from the second batch's mark.
    const more = await ingest(Array.from({ length: 500 }, (_, i) => ({ type: 'message.received', data: { message_id: `r-${i + 1}` } })));
    const all = [...events, ...more];
    // A read includes every event acknowledged before it (docs/api.md), so the page can read them at once.
    const newest = (from: number, n: number): string[] => all.slice(Math.max(0, all.length - from - n), all.length - from).map((e) => e.id).reverse();

    const form = page.locator('#log-form');
    await form.getByLabel('Type').selectOption('');
    await form.getByLabel('Order').selectOption('newest');
    await form.getByLabel('Per page').selectOption('100');
    await form.getByRole('button', { name: 'Show' }).click();
    await page.locator('#log-page', { hasText: 'page 1 of 6 · 515 events' }).waitFor();
    expect(await page.locator('#log-order-label').textContent()).to.equal('Events, newest first');
    expect(await ids()).to.deep.equal(newest(0, 100));
    expect(await page.getByRole('button', { name: 'Previous page' }).isDisabled()).to.equal(true);

    await page.getByRole('button', { name: 'Next page' }).click();
    await page.locator('#log-page', { hasText: 'page 2 of 6' }).waitFor();
    expect(await ids()).to.deep.equal(newest(100, 100));
    for (let p = 3; p <= 6; p += 1) {
      await page.getByRole('button', { name: 'Next page' }).click();
      await page.locator('#log-page', { hasText: `page ${p} of 6` }).waitFor();
    }
    // The oldest page: the first 15 events, newest of them first, and nothing older.
    expect(await ids()).to.deep.equal(events.map((e) => e.id).reverse());
    expect(await page.locator('#log-end').textContent()).to.equal('Start of the log: its oldest event.');
    expect(await page.getByRole('button', { name: 'Next page' }).isDisabled()).to.equal(true);
    await page.getByRole('button', { name: 'Previous page' }).click();
    await page.locator('#log-page', { hasText: 'page 5 of 6' }).waitFor();
    expect(await ids()).to.deep.equal(newest(400, 100));

    // First page reads on from the last mark: events written since are on top.
    const later = await ingest([{ type: 'call.ended', data: { call_id: 'late-1' } }, { type: 'call.ended', data: { call_id: 'late-2' } }]);
    all.push(...later);
    await page.getByRole('button', { name: 'First page' }).click();
    await page.locator('#log-page', { hasText: 'page 1 of 6 · 517 events' }).waitFor();
    expect(await ids()).to.deep.equal(newest(0, 100));
    await form.getByLabel('Per page').selectOption('10');
    await form.getByRole('button', { name: 'Show' }).click();
    await page.locator('#log-page', { hasText: 'page 1 of 52 · 517 events' }).waitFor();
    expect(await ids()).to.deep.equal(newest(0, 10));
    await page.locator('#log-section').screenshot({ path: `${SHOTS}/event-log-newest.png` });

    await form.getByLabel('Type').selectOption('message.sent');
    await form.getByRole('button', { name: 'Show' }).click();
    await page.locator('#log-page', { hasText: '3 events · message.sent' }).waitFor();
    expect(await ids()).to.deep.equal(events.filter((e) => e.type === 'message.sent').map((e) => e.id).reverse());
  });

  it('serves the icon the page links (no error in the browser console on any view, no favicon 404)', async () => {
    expect(consoleErrors).to.deep.equal([]);
    const href = await page.locator('link[rel="icon"]').getAttribute('href', { timeout: 1000 });
    expect(href).to.equal('/dashboard/favicon.svg');
    const icon = await page.evaluate(async (u) => {
      const res = await fetch(u);
      return { status: res.status, type: res.headers.get('content-type'), body: await res.text() };
    }, href!);
    expect(icon.status).to.equal(200);
    expect(icon.type).to.equal('image/svg+xml');
    expect(icon.body).to.match(/^<svg /);
  });

  it('drew every view without breaking the strict content security policy (charts are SVG elements, no inline style or script)', async () => {
    expect(cspViolations).to.deep.equal([]);
    // The counter works: an inline style attribute is refused and counted.
    await page.evaluate(() => (globalThis as unknown as { document: { body: { setAttribute(k: string, v: string): void } } }).document.body.setAttribute('style', 'color: red'));
    await eventually(async () => (cspViolations.length > 0 ? true : undefined), 5_000);
    expect(cspViolations[0]).to.match(/^style-src/);
  });
});
