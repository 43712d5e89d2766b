// Scenario 5's webhook receivers, HTTPS on 127.0.0.1 with a self-signed
// certificate (its PEM handed back for WEBHOOK_CA_FILE): `fast` answers 200 at
// once, except on paths with a `/hanging/` segment, which it reads and never
// answers (scenario 5g: hanging subscriptions on the healthy ones' origin);
// `hang` reads the request and never answers (the sender's 4 s timeout ends
// each attempt); `flaky` answers 500 to the first request of each
// delivery id and 200 to the next (scenario 5e: every delivery goes through
// one retry). Records when each delivery arrived (answered 200) and its data.t.
import https from 'node:https';
import { writeFileSync } from 'node:fs';
import { generate } from 'selfsigned';
import { serve } from './serve.mjs';

const now = () => performance.timeOrigin + performance.now();
let received = [];
const counts = { fast: 0, hang: 0, flaky: 0, flakyFailed: 0 };
/** Delivery ids the flaky receiver has failed once. */
const failedOnce = new Set();
const servers = [];

async function listen(kind, cert, key) {
  const server = https.createServer({ cert, key, keepAliveTimeout: 65_000 }, (req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      counts[kind]++;
      if (kind === 'hang' || req.url.includes('/hanging/')) return; // never answered
      const delivery = req.headers['x-service-delivery'];
      if (kind === 'flaky' && !failedOnce.has(delivery)) {
        failedOnce.add(delivery);
        counts.flakyFailed++;
        res.writeHead(500, { 'content-type': 'text/plain' });
        res.end('try again');
        return;
      }
      const t = now();
      let body = null;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        // counted, not timed
      }
      received.push([req.url, body?.id ?? null, body?.data?.t ?? null, t]);
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('ok');
    });
  });
  server.headersTimeout = 0;
  server.requestTimeout = 0;
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  servers.push(server);
  return server.address().port;
}

serve({
  async start({ caFile }) {
    const pems = await generate([{ name: 'commonName', value: 'bench-webhook-receiver' }], {
      keyType: 'ec',
      algorithm: 'sha256',
      notAfterDate: new Date(Date.now() + 24 * 3600 * 1000),
      extensions: [
        { name: 'basicConstraints', cA: true, critical: true },
        { name: 'keyUsage', digitalSignature: true, keyCertSign: true, critical: true },
        { name: 'extKeyUsage', serverAuth: true },
        { name: 'subjectAltName', altNames: [{ type: 7, ip: '127.0.0.1' }] },
      ],
    });
    writeFileSync(caFile, pems.cert);
    return { fast: await listen('fast', pems.cert, pems.private), hang: await listen('hang', pems.cert, pems.private), flaky: await listen('flaky', pems.cert, pems.private) };
  },
  /** Deliveries received by the fast receiver since the last call: [path, eventId, data.t, receivedAt]. */
  take() {
    const out = received;
    received = [];
    return { received: out, counts: { ...counts } };
  },
});
