import { existsSync, mkdirSync } from 'node:fs';
import { expect } from 'chai';
import { chromium, type Browser, type Page } from 'playwright-core';
import type { RunningApi } from '../src/server.js';
import { Receiver } from '../../shared/test/support/receiver.js';
import { webhookApi } from './support/webhooks.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const ARTIFACTS = 'test-artifacts';

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
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
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
    await form.getByRole('button', { name: 'Add webhook' }).click();
    await page.locator('#hook-secret').waitFor({ state: 'visible' });
    expect(await page.locator('#hook-secret-value').textContent()).to.match(/^whsec_/);
    const row = page.locator('#hooks tr', { hasText: url });
    await row.waitFor();
    expect(await row.locator('td').nth(1).textContent()).to.equal('*');

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
    await row.getByRole('button', { name: `Disable ${url}` }).click();
    await row.getByRole('button', { name: `Enable ${url}` }).waitFor();
    expect(await row.locator('td').nth(2).textContent()).to.match(/disabled$/);
    expect(await enabledOf()).to.equal(false);
    await row.getByRole('button', { name: `Enable ${url}` }).click();
    await row.getByRole('button', { name: `Disable ${url}` }).waitFor();
    expect(await row.locator('td').nth(2).textContent()).to.not.match(/disabled/);
    expect(await enabledOf()).to.equal(true);

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
