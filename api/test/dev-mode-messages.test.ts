/**
 * In development (`npm start`) a refusal a developer can lift names the setting that lifts it:
 * the signup limit its SIGNUP_LIMIT_PER_HOUR, a webhook to a local receiver
 * WEBHOOK_ALLOW_PRIVATE_TARGETS. Outside development a rate-limit refusal gives the limit only.
 */
import { expect } from 'chai';
import { ownDatabase, uniqueName } from '#test-support/env.js';
import { call, startDevApi, startTestApi } from './support/api.js';
import { createAccount } from './support/accounts.js';

const signup = (base: string) => call(base, 'POST', '/api/auth/signup', { body: { email: `${uniqueName('dev')}@example.com`, name: 'Dev', password: 'correct horse battery' } });

describe('development mode names the setting behind a refusal', function () {
  this.timeout(60_000);

  it('the signup limit names SIGNUP_LIMIT_PER_HOUR in development, and only the limit elsewhere', async () => {
    const [dev, test] = await Promise.all([startDevApi({ SIGNUP_LIMIT_PER_HOUR: '1' }), startTestApi({ SIGNUP_LIMIT_PER_HOUR: '1', MONGO_DB: ownDatabase('limits') })]);
    for (const api of [dev, test]) expect((await signup(api.url)).status).to.equal(201);
    const refused = await signup(dev.url);
    expect(refused.status).to.equal(429);
    expect(refused.body.error.message).to.match(/^Rate limit exceeded: 1 signups per hour from one address \(SIGNUP_LIMIT_PER_HOUR on the server\); retry in \d+ s$/);
    const elsewhere = await signup(test.url);
    expect(elsewhere.status).to.equal(429);
    expect(elsewhere.body.error.message).to.match(/^Rate limit exceeded: 1 signups per hour from one address; retry in \d+ s$/);
  });

  it('a webhook to a loopback or private receiver names WEBHOOK_ALLOW_PRIVATE_TARGETS', async () => {
    const dev = await startDevApi();
    const who = await createAccount(dev.url);
    for (const url of ['https://127.0.0.1:8443/hook', 'https://localhost/hook', 'https://192.168.1.20/hook']) {
      const res = await call(dev.url, 'POST', '/api/v1/webhooks', { body: { url, events: ['*'] }, headers: { 'x-api-key': who.apiKey } });
      expect(res.status, url).to.equal(400);
      expect(res.body.error.message, url).to.match(/WEBHOOK_ALLOW_PRIVATE_TARGETS=true allows loopback and private targets in development/);
    }
  });
});
