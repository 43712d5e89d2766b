import net from 'node:net';
import { sharedApis } from '../../support/api.js';
import { createAccount } from '../../support/accounts.js';
describe('lp probe', function () {
  this.timeout(200000);
  it('probes', async () => {
    const [, b] = await sharedApis();
    const acct = await createAccount(b.url);
    if (process.env.LP_STUB) { (b.deps.limits.apiKey as any).consume = async () => ({ limit: 1, remaining: 1, resetSeconds: 1 }); }
    { const t = Date.now(); await Promise.all(Array.from({ length: 500 }, () => b.deps.mongo.collections.apiKeys.findOne({ hash: 'abc' }))); console.log('500 concurrent findOne', Date.now() - t, 'ms'); }
    { const t = Date.now(); for (let i = 0; i < 200; i++) await b.deps.mongo.collections.apiKeys.findOne({ hash: 'abc' }); console.log('200 sequential findOne', Date.now() - t, 'ms'); }
    { const t = Date.now(); await Promise.all(Array.from({ length: 500 }, () => b.deps.mongo.collections.users.findOne({ _id: acct.userId }))); console.log('500 concurrent findOne _id', Date.now() - t, 'ms'); }
    const body = JSON.stringify({ timeout_ms: 55000 });
    const request = `POST /api/v1/events/wait HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${acct.apiKey}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
    const url = new URL(b.url);
    const n = Number(process.env.LP_N ?? 500);
    const t0 = Date.now();
    const socks: net.Socket[] = [];
    const answers: string[] = [];
    for (let i = 0; i < n; i++) { const s = net.connect({ host: url.hostname, port: Number(url.port) }, () => s.write(request)); s.on('data', (d) => answers.push(d.toString().slice(0, 200))); if (process.env.LP_EARLY) setTimeout(() => s.destroy(), Math.random() * Number(process.env.LP_EARLY)); s.on('error', () => {}); socks.push(s); }
    for (let i = 0; i < (process.env.LP_EARLY ? 4 : 100); i++) { await new Promise((r) => setTimeout(r, 500)); console.log(Date.now() - t0, 'ms waiters', b.deps.events.registry.size, 'answers', answers.length); if (b.deps.events.registry.size >= n) break; }
    if (answers.length) console.log(answers.slice(0, 3));
    for (const s of socks) s.destroy();
    for (let i = 0; i < 40; i++) { await new Promise((r) => setTimeout(r, 500)); console.log('after destroy', Date.now() - t0, b.deps.events.registry.size); if (b.deps.events.registry.size === 0) break; }
  });
});
