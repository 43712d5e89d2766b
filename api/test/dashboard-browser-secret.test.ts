import { existsSync, mkdirSync } from 'node:fs';
import { expect } from 'chai';
import { chromium, type Browser, type Page } from 'playwright-core';
import type { RunningApi } from '../src/server.js';
import { webhookApi } from './support/webhooks.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const ARTIFACTS = 'test-artifacts';

/**
 * The dashboard's "Rotate secret" button in headless Chromium (Debian's
 * package; `npm test` installs it when missing, these tests never skip).
 */
describe('dashboard in a real browser: rotating a webhook secret', function () {
  this.timeout(60_000);
  let api: RunningApi;
  let browser: Browser;
  let page: Page;

  before(async function () {
    if (!existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM}: apt-get install -y chromium, or set CHROMIUM_PATH`);
    ({ api } = await webhookApi());
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    page = await browser.newPage();
  });

  after(async () => {
    await browser?.close();
  });

  /** The secret the API's re-reveal operation shows now, asked with the page's own session. */
  const revealed = (id: string): Promise<string> =>
    page.evaluate(async (hookId) => {
      const token = (globalThis as unknown as { sessionStorage: { getItem(k: string): string | null } }).sessionStorage.getItem('svc_session');
      const res = await fetch(`/api/v1/webhooks/${hookId}/secret`, { method: 'POST', headers: { authorization: `Bearer ${token}` } });
      return ((await res.json()) as { secret: string }).secret;
    }, id);

  const hookId = (url: string): Promise<string> =>
    page.evaluate(async (u) => {
      const token = (globalThis as unknown as { sessionStorage: { getItem(k: string): string | null } }).sessionStorage.getItem('svc_session');
      const res = await fetch('/api/v1/webhooks', { headers: { authorization: `Bearer ${token}` } });
      return ((await res.json()) as { webhooks: { id: string; url: string }[] }).webhooks.find((w) => w.url === u)!.id;
    }, url);

  it('shows the new secret, which the API now reveals, and says until when the old one still signs', async () => {
    await page.goto(`${api.url}/dashboard`);
    const signup = page.locator('#signup-form');
    await signup.getByLabel('Name').fill('Rotation Tester');
    await signup.getByLabel('Email').fill(`ui-rotate-${Date.now()}@example.com`);
    await signup.getByLabel('Password').fill('correct horse battery');
    await signup.getByRole('button', { name: 'Sign up' }).click();
    await page.locator('#app').waitFor({ state: 'visible' });

    const url = 'https://127.0.0.1:8443/ui-rotate';
    const form = page.locator('#hook-form');
    await form.getByLabel('HTTPS URL').fill(url);
    await form.getByRole('button', { name: 'Add webhook' }).click();
    await page.locator('#hook-secret').waitFor({ state: 'visible' });
    const original = (await page.locator('#hook-secret-value').textContent()) ?? '';
    expect(original).to.match(/^whsec_/);
    const row = page.locator('#hooks tr', { hasText: url });
    await row.waitFor();
    const id = await hookId(url);

    await row.getByRole('button', { name: `Rotate the signing secret of ${url}` }).click();
    await page.locator('#status', { hasText: 'New signing secret' }).waitFor();
    const rotated = (await page.locator('#hook-secret-value').textContent()) ?? '';
    expect(rotated).to.match(/^whsec_/).and.not.equal(original);
    expect(await revealed(id)).to.equal(rotated);
    expect(await page.locator('#status').textContent()).to.include(url).and.match(/old one also signs deliveries until/);
    expect(await page.locator('#status').getAttribute('class')).to.not.equal('error');

    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: `${ARTIFACTS}/dashboard-secret-rotation.png`, fullPage: true });

    // Rotating again: another new secret; the row and its other buttons stay.
    await row.getByRole('button', { name: `Rotate the signing secret of ${url}` }).click();
    let again = rotated;
    for (let i = 0; i < 100 && again === rotated; i++) {
      await new Promise((r) => setTimeout(r, 100));
      again = (await page.locator('#hook-secret-value').textContent()) ?? '';
    }
    expect(again).to.match(/^whsec_/).and.not.equal(rotated);
    expect(await revealed(id)).to.equal(again);
    await row.getByRole('button', { name: `Delete ${url}` }).waitFor();
  });
});
