// Scenario 5's reference: a bare Node HTTPS client (keep-alive agent, the
// delivery process's concurrency) posting delivery-sized bodies to the same
// fast receiver: the ceiling of HTTPS requests/s on this machine.
import https from 'node:https';
import { readFileSync } from 'node:fs';
import { serve } from './serve.mjs';

serve({
  async run({ url, caFile, concurrency, seconds, body }) {
    const agent = new https.Agent({ keepAlive: true, maxSockets: concurrency, ca: readFileSync(caFile, 'utf8') });
    const end = performance.now() + seconds * 1000;
    let ok = 0;
    const t0 = performance.now();
    const one = () =>
      new Promise((resolve) => {
        const req = https.request(url, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
          res.resume();
          res.on('end', () => {
            if (res.statusCode === 200) ok++;
            resolve();
          });
        });
        req.on('error', resolve);
        req.end(body);
      });
    await Promise.all(Array.from({ length: concurrency }, async () => { while (performance.now() < end) await one(); }));
    agent.destroy();
    const elapsed = (performance.now() - t0) / 1000;
    return { ok, seconds: elapsed, rps: ok / elapsed };
  },
});
