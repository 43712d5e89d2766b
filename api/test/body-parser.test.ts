/**
 * The JSON body fast path (api/src/middleware/body.ts reads a UTF-8 JSON
 * body with a Content-Length itself) answers every body exactly as the
 * koa-body path does: each body is sent once with a Content-Length (fast
 * path) and once chunked (koa-body), and the answers must match.
 */
import { expect } from 'chai';
import { startTestApi } from './support/api.js';
import type { RunningApi } from '../src/server.js';
import { parseLimit } from '../src/middleware/body.js';

describe('JSON bodies: the fast path answers as koa-body does', function () {
  this.timeout(60_000);
  let api: RunningApi;
  before(async () => {
    api = await startTestApi();
  });

  const bodies: [string, string][] = [
    ['a valid object', JSON.stringify({ email: 'nobody@example.com', password: 'wrong-password-1' })],
    ['an object failing validation', JSON.stringify({ email: 'not an email' })],
    ['an empty object', '{}'],
    ['an array', '[1,2]'],
    ['a string', '"text"'],
    ['a number', '12'],
    ['null', 'null'],
    ['whitespace then an object', ' \n\t{"email":1}'],
    ['broken JSON', '{"a":'],
    ['trailing garbage', '{"a":1} x'],
    ['a __proto__ key', '{"__proto__":{"admin":true},"email":"x@example.com"}'],
    ['an escaped __proto__ key, nested', '{"a":{"\\u005f_proto__":{"admin":true}}}'],
    ['a BOM before the object', '\ufeff{"email":"x"}'],
    ['invalid UTF-8', Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d]).toString('latin1')],
  ];

  for (const [name, body] of bodies) {
    it(`answers ${name} the same on both paths`, async () => {
      const bytes = name === 'invalid UTF-8' ? Buffer.from(body, 'latin1') : Buffer.from(body, 'utf8');
      const viaKoaBody = await rawRequestBuffer(bytes, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
      const fastBytes = await rawRequestBuffer(bytes, { 'content-type': 'application/json', 'content-length': String(bytes.length) });
      expect(fastBytes, `${name}: fast path vs koa-body`).to.deep.equal(viaKoaBody);
    });
  }

  it('answers over the limit with 413 on both paths, and a charset other than UTF-8 through koa-body', async () => {
    const big = Buffer.from(JSON.stringify({ big: 'x'.repeat(1_100_000) }));
    expect(await rawRequestBuffer(big, { 'content-type': 'application/json', 'content-length': String(big.length) })).to.deep.equal({ status: 413, code: 'payload_too_large: Request body is larger than the allowed limit' });
    expect(await rawRequestBuffer(big, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' })).to.deep.equal({ status: 413, code: 'payload_too_large: Request body is larger than the allowed limit' });
    const latin = Buffer.from('{"email":"caf\xe9"}', 'latin1');
    const answered = await rawRequestBuffer(latin, { 'content-type': 'application/json; charset=iso-8859-1', 'content-length': String(latin.length) });
    expect(answered.status).to.not.equal(500);
  });

  it('reads body limits as koa-body does', () => {
    expect(parseLimit('1mb')).to.equal(1024 * 1024);
    expect(parseLimit('16mb')).to.equal(16 * 1024 * 1024);
    expect(parseLimit('512kb')).to.equal(512 * 1024);
    expect(parseLimit('100')).to.equal(100);
  });

  /** Sends the exact bytes; the status and error code of the answer. */
  async function rawRequestBuffer(bytes: Buffer, headers: Record<string, string>): Promise<{ status: number; code: string | null }> {
    const http = await import('node:http');
    const url = new URL(api.url);
    return new Promise((resolve, reject) => {
      const req = http.request({ host: url.hostname, port: url.port, method: 'POST', path: '/api/auth/login', headers }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (text += d));
        res.on('end', () => {
          const parsed = JSON.parse(text) as { error?: { code?: string; message?: string } };
          resolve({ status: res.statusCode ?? 0, code: parsed.error ? `${parsed.error.code}: ${parsed.error.message}` : null });
        });
      });
      req.on('error', reject);
      req.end(bytes);
    });
  }
});
