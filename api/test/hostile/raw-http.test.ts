/**
 * Bytes fetch will not send: oversized request lines and header blocks,
 * bytes above 0x7F and bare CR/LF in headers, broken framing, smuggling
 * shapes. Node's parser refuses most of these before Koa sees them; the
 * answer must still be the house JSON error (regression: Node's own 431/400
 * had no body and no request id).
 */
import { expect } from 'chai';
import fc from 'fast-check';
import type { RunningApi } from '../../src/server.js';
import { sharedApis } from '../support/api.js';
import { rawExchange } from './support/http.js';
import { assertSafe } from './support/oracle.js';
import { fuzz } from './support/fuzz.js';
import { record } from './support/tally.js';

const req = (lines: string[], body = ''): string => `${lines.join('\r\n')}\r\n\r\n${body}`;

describe('hostile: raw HTTP the parser refuses', function () {
  this.timeout(60_000);
  let api: RunningApi;

  before(async () => {
    [api] = await sharedApis();
  });

  async function expectJsonError(bytes: string | Buffer, status: number, code: string): Promise<void> {
    const res = await rawExchange(api.url, bytes);
    expect(res, 'an answer').to.not.equal(null);
    assertSafe(res!, `raw ${String(bytes).slice(0, 80)}`);
    expect(res!.status).to.equal(status);
    expect(JSON.parse(res!.text).error.code).to.equal(code);
  }

  it('answers a request line over 16 KB with a 431 JSON error', async () => {
    await expectJsonError(req([`GET /api/auth/me?q=${'a'.repeat(20_000)} HTTP/1.1`, 'Host: x']), 431, 'headers_too_large');
  });

  it('answers a header block over 16 KB with a 431 JSON error', async () => {
    await expectJsonError(req(['GET /healthz HTTP/1.1', 'Host: x', `Authorization: Bearer ${'x'.repeat(20_000)}`]), 431, 'headers_too_large');
  });

  it('answers broken request lines and header syntax with a 400 JSON error', async () => {
    const broken = [
      'GARBAGE\r\n\r\n',
      'GET / HTTP/9.9\r\nHost: x\r\n\r\n',
      'GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header: 1\r\n\r\n',
      'GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\u0000b\r\n\r\n',
      'GET /healthz HTTP/1.1\r\nHost: x\r\n: empty-name\r\n\r\n',
      // Request smuggling shapes: both framings, or a bad chunk size.
      'POST /api/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
      'POST /api/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n',
      'POST /api/auth/login HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}',
    ];
    for (const bytes of broken) await expectJsonError(bytes, 400, 'bad_request');
    record('limits', 'malformed HTTP framing', broken.length);
  });

  it('answers header values with any byte the parser lets through safely', async () => {
    const byte = fc.integer({ min: 0x20, max: 0xff }).filter((c) => c !== 0x7f);
    const value = fc.array(byte, { minLength: 1, maxLength: 120 }).map((codes) => Buffer.from(codes));
    const header = fc.constantFrom('Authorization: Bearer ', 'Authorization: ', 'X-API-Key: ', 'X-Request-Id: ', 'Content-Type: ', 'Last-Event-ID: ', 'Origin: ');
    const path = fc.constantFrom('/api/auth/me', '/api/auth/api-key', '/api/auth/login', '/healthz');
    await fuzz('raw header bytes', 150, fc.tuple(path, header, value), async ([p, h, v]) => {
      const method = p === '/api/auth/login' || p === '/api/auth/api-key' ? 'POST' : 'GET';
      const head = Buffer.from(`${method} ${p} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 2\r\n${h}`, 'latin1');
      const bytes = Buffer.concat([head, v, Buffer.from('\r\n\r\n{}', 'latin1')]);
      const res = await rawExchange(api.url, bytes);
      if (!res) throw new Error(`no answer to header ${h}${v.toString('latin1')}`);
      assertSafe(res, `${method} ${p} with ${h}<${v.toString('hex')}>`);
      if (p !== '/healthz' && p !== '/api/auth/login' && res.status < 400) throw new Error(`raw header ${h}<${v.toString('hex')}> authenticated`);
    });
  });
});
