import { expect } from 'chai';
import { sendingState } from './subscription-fence.js';
import { checkHeaders, maskHeaders, maySet } from './webhook-headers.js';

describe('webhook custom headers', () => {
  it('accepts ordinary headers and refuses the service-set, hop-by-hop and malformed ones by name', () => {
    expect(checkHeaders({ 'X-Api-Key': 'abc', Authorization: 'Bearer t', 'X-Tenant': 'a b\tc' })).to.deep.equal([]);
    for (const name of ['X-Service-Event', 'x-service-anything', 'Webhook-Signature', 'webhook-id', 'WEBHOOK-TIMESTAMP', 'content-type', 'Content-Length', 'user-agent', 'Host', 'Connection', 'keep-alive', 'Transfer-Encoding', 'TE', 'Trailer', 'Upgrade', 'Proxy-Authorization', 'proxy-anything']) {
      const problems = checkHeaders({ [name]: 'x' });
      expect(problems, name).to.have.length(1);
      expect(problems[0]!.path).to.equal(`headers.${name}`);
      expect(problems[0]!.message).to.include(name);
      expect(maySet(name), name).to.equal(false);
    }
    expect(maySet('X-Api-Key')).to.equal(true);
    expect(checkHeaders({ 'X:Y': 'x' })[0]!.message).to.match(/not a valid header name/);
    expect(checkHeaders({ 'X-A': 'a\nb' })[0]!.message).to.match(/no line breaks/);
    expect(checkHeaders({ 'X-A': ' padded' })[0]!.message).to.match(/none at either end/);
    expect(checkHeaders({ 'X-A': 'é' })[0]!.message).to.match(/visible ASCII/);
  });

  it('masks every value', () => {
    expect(maskHeaders(['X-Api-Key', 'B'])).to.deep.equal({ 'X-Api-Key': '****', B: '****' });
    expect(maskHeaders(undefined)).to.deep.equal({});
  });

  it('is part of the state a connecting send is fenced on: new headers withhold a request prepared under the old ones', () => {
    const sub = { url: 'https://example.com/h', secret_enc: 'v1.s' };
    expect(sendingState({ ...sub, headers_enc: 'v1.a' })).not.to.equal(sendingState({ ...sub, headers_enc: 'v1.b' }));
    expect(sendingState({ ...sub, headers_enc: 'v1.a' })).not.to.equal(sendingState(sub));
    expect(sendingState({ ...sub })).to.equal(sendingState({ ...sub }));
  });
});
