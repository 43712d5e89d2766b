import { expect } from 'chai';
import { EVENT_TYPES } from '#shared/eventlog/types.js';
import type { RunningApi } from '../src/server.js';
import { startTestApi } from './support/api.js';

describe('dashboard assets', () => {
  let api: RunningApi;
  before(async () => {
    api = await startTestApi();
  });

  it('serves the page with a strict content security policy', async () => {
    const res = await fetch(`${api.url}/dashboard`);
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type')).to.match(/^text\/html/);
    // Word for word: the charts are SVG elements styled from app.css, so nothing needs 'unsafe-inline'.
    expect(res.headers.get('content-security-policy')).to.equal("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'");
    const html = await res.text();
    expect(html).to.include('<script type="module" src="/dashboard/app.js">');
    expect(html).to.not.match(/<script>[^<]/); // no inline script
  });

  it('serves the script, stylesheet and icon it references', async () => {
    const js = await fetch(`${api.url}/dashboard/app.js`);
    expect(js.headers.get('content-type')).to.match(/^text\/javascript/);
    expect(await js.text()).to.include('/api/v1/events/stream-token');
    const css = await fetch(`${api.url}/dashboard/app.css`);
    expect(css.headers.get('content-type')).to.match(/^text\/css/);
    // The page's favicon (without one the browser asks for /favicon.ico and logs a 404).
    const html = await (await fetch(`${api.url}/dashboard`)).text();
    expect(html).to.include('<link rel="icon" href="/dashboard/favicon.svg" type="image/svg+xml">');
    const icon = await fetch(`${api.url}/dashboard/favicon.svg`);
    expect(icon.status).to.equal(200);
    expect(icon.headers.get('content-type')).to.equal('image/svg+xml');
  });

  it('listens for every event type the service emits (an SSE event of a type it does not name never reaches the live feed)', async () => {
    const js = await (await fetch(`${api.url}/dashboard/app.js`)).text();
    const list = /const EVENT_TYPES = (\[[^\]]*\]);/.exec(js);
    expect(list, 'the dashboard names its event types').to.not.equal(null);
    expect(JSON.parse(list![1]!.replace(/'/g, '"'))).to.deep.equal([...EVENT_TYPES]);
  });
});
