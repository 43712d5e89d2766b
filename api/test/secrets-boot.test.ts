import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { expect } from 'chai';

/** Runs a process's entry point with exactly `env` (plus PATH) and returns how it ended. */
async function boot(entry: string, env: Record<string, string>): Promise<{ code: number; stderr: string }> {
  try {
    await promisify(execFile)(process.execPath, ['--import', 'tsx', entry], { env: { PATH: process.env.PATH ?? '', ...env }, timeout: 30_000 });
    return { code: 0, stderr: '' };
  } catch (err) {
    const e = err as { code?: number; stderr?: string };
    return { code: e.code ?? -1, stderr: e.stderr ?? '' };
  }
}

describe('secrets never default silently', function () {
  this.timeout(60_000);

  it('the API stops at boot, naming the missing secret, when NODE_ENV is not development', async () => {
    const unset = await boot('api/src/main.ts', {});
    expect(unset.code).to.equal(2);
    expect(unset.stderr).to.match(/JWT_SECRET is required/);
    const test = await boot('api/src/main.ts', { NODE_ENV: 'test', JWT_SECRET: 'j'.repeat(40), INGEST_TOKEN: 'i'.repeat(30) });
    expect(test.code).to.equal(2);
    expect(test.stderr).to.match(/WEBHOOK_SECRET_KEY is required/);
  });

  it('the API refuses a development default on a HOST other than loopback, in development mode too', async () => {
    const res = await boot('api/src/main.ts', { NODE_ENV: 'development', HOST: '0.0.0.0' });
    expect(res.code).to.equal(2);
    expect(res.stderr).to.match(/JWT_SECRET is the public development default and is refused with HOST=0\.0\.0\.0/);
  });

  it('the delivery worker stops at boot without WEBHOOK_SECRET_KEY', async () => {
    const res = await boot('delivery/src/main.ts', { NODE_ENV: 'production' });
    expect(res.code).to.not.equal(0);
    expect(res.stderr).to.match(/WEBHOOK_SECRET_KEY is required/);
  });
});
