import { expect } from 'chai';
import { checkAddress, checkWebhookUrl, classifyAddress, redactAddresses, type Resolver } from './url-safety.js';

const strict = { allowPrivate: false };
const dev = { allowPrivate: true };

/** A fake DNS: names in the map resolve to their addresses, everything else does not exist. */
function fakeDns(map: Record<string, string[]>): Resolver {
  return async (name) => {
    const found = map[name];
    if (!found) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${name}`), { code: 'ENOTFOUND' });
    return found;
  };
}

const dns = fakeDns({
  'hooks.example.com': ['93.184.216.34', '2606:2800:220:1:248:1893:25c8:1946'],
  'inside.example.com': ['127.0.0.1'],
  'half.example.com': ['93.184.216.34', '10.1.2.3'],
  'metadata.example.com': ['169.254.169.254'],
  'v6local.example.com': ['::1'],
});

describe('url safety', () => {
  describe('classifyAddress', () => {
    const cases: [string, string | null][] = [
      ['93.184.216.34', null],
      ['8.8.8.8', null],
      ['2606:4700:4700::1111', null],
      ['127.0.0.1', 'loopback'],
      ['127.255.255.254', 'loopback'],
      ['10.0.0.1', 'private'],
      ['172.16.0.1', 'private'],
      ['172.31.255.255', 'private'],
      ['192.168.1.1', 'private'],
      ['169.254.169.254', 'link_local'],
      ['100.64.0.1', 'cgnat'],
      ['0.0.0.0', 'unspecified'],
      ['224.0.0.1', 'multicast'],
      ['255.255.255.255', 'broadcast'],
      ['192.0.2.10', 'documentation'],
      ['198.18.0.1', 'reserved'],
      ['240.0.0.1', 'reserved'],
      ['::1', 'loopback'],
      ['::', 'unspecified'],
      ['fe80::1', 'link_local'],
      ['fc00::1', 'private'],
      ['fd12:3456::1', 'private'],
      ['ff02::1', 'multicast'],
      ['2001:db8::1', 'documentation'],
      ['::ffff:127.0.0.1', 'loopback'],
      ['::ffff:7f00:1', 'loopback'],
      ['::ffff:10.0.0.1', 'private'],
      ['::ffff:93.184.216.34', null],
      ['::127.0.0.1', 'loopback'],
      ['64:ff9b::7f00:1', 'loopback'],
      ['64:ff9b::a9fe:a9fe', 'link_local'],
      ['64:ff9b::5db8:d822', null],
      ['64:ff9b:1::1', 'private'],
      ['2002:7f00:1::', 'loopback'],
      ['2002:c0a8:101::1', 'private'],
      ['2002:5db8:d822::1', null],
      ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'reserved'], // Teredo
      ['100::1', 'reserved'],
      ['4000::1', 'reserved'],
      ['not-an-ip', 'reserved'],
    ];
    for (const [ip, expected] of cases) {
      it(`classifies ${ip} as ${expected ?? 'public'}`, () => {
        expect(classifyAddress(ip)).to.equal(expected);
      });
    }
  });

  describe('checkWebhookUrl', () => {
    const hostile: [string, string][] = [
      ['http://hooks.example.com/x', 'scheme'],
      ['ftp://hooks.example.com/x', 'scheme'],
      ['https://user:pass@hooks.example.com/x', 'credentials'],
      ['https://user@hooks.example.com/x', 'credentials'],
      ['https://@hooks.example.com/x', 'credentials'],
      ['https://127.0.0.1/x', 'loopback'],
      ['https://127.1/x', 'loopback'],
      ['https://2130706433/x', 'loopback'],
      ['https://0x7f000001/x', 'loopback'],
      ['https://017700000001/x', 'loopback'],
      ['https://0177.0.0.1/x', 'loopback'],
      ['https://[::1]/x', 'loopback'],
      ['https://[::ffff:127.0.0.1]/x', 'loopback'],
      ['https://[0:0:0:0:0:0:0:1]/x', 'loopback'],
      ['https://10.0.0.5/x', 'private'],
      ['https://172.16.3.4/x', 'private'],
      ['https://192.168.0.10/x', 'private'],
      ['https://[fd00::1]/x', 'private'],
      ['https://169.254.169.254/latest/meta-data/', 'link_local'],
      ['https://[fe80::1]/x', 'link_local'],
      ['https://100.64.1.1/x', 'cgnat'],
      ['https://0.0.0.0/x', 'unspecified'],
      ['https://0/x', 'unspecified'],
      ['https://[::]/x', 'unspecified'],
      ['https://224.0.0.251/x', 'multicast'],
      ['https://[64:ff9b::7f00:1]/x', 'loopback'],
      ['https://[2002:7f00:1::]/x', 'loopback'],
      ['https://localhost/x', 'local_name'],
      ['https://LOCALHOST./x', 'local_name'],
      ['https://localhost../x', 'local_name'],
      ['https://localhost.../x', 'local_name'],
      ['https://api.localhost../x', 'local_name'],
      ['https://metadata.google.internal../x', 'local_name'],
      ['https://intranet../x', 'local_name'],
      ['https://127.0.0.1./x', 'loopback'],
      ['https://127.0.0.1../x', 'loopback'],
      ['https://127.1../x', 'loopback'],
      ['https://0x7f000001.../x', 'loopback'],
      ['https://169.254.169.254../x', 'link_local'],
      ['https://./x', 'invalid_url'],
      ['https://..../x', 'invalid_url'],
      ['https://hooks.example.com:8080/x', 'port'],
      ['https://hooks.example.com:80/x', 'port'],
      ['https://93.184.216.34:22/x', 'port'],
      ['https://hooks.example.com:0/x', 'port'],
      ['https://loc%61lhost/x', 'local_name'],
      ['https://api.localhost/x', 'local_name'],
      ['https://printer.local/x', 'local_name'],
      ['https://metadata.google.internal/x', 'local_name'],
      ['https://intranet/x', 'local_name'],
      ['https://inside.example.com/x', 'loopback'],
      ['https://half.example.com/x', 'private'],
      ['https://metadata.example.com/x', 'link_local'],
      ['https://v6local.example.com/x', 'loopback'],
      ['https://nowhere.example.com/x', 'unresolvable'],
      ['not a url', 'invalid_url'],
    ];
    for (const [url, reason] of hostile) {
      it(`rejects ${url} (${reason})`, async () => {
        const v = await checkWebhookUrl(url, strict, dns);
        expect(v).to.include({ ok: false, reason });
        if (!v.ok) expect(v.message).to.be.a('string').and.not.equal('');
      });
    }

    it('accepts a public https name whose every address is public, on any port', async () => {
      expect(await checkWebhookUrl('https://hooks.example.com/in?x=1', strict, dns)).to.deep.equal({ ok: true });
      expect(await checkWebhookUrl('https://hooks.example.com:8443/in', strict, dns)).to.deep.equal({ ok: true });
      expect(await checkWebhookUrl('https://93.184.216.34/in', strict, dns)).to.deep.equal({ ok: true });
    });

    it('says which rule a resolved name broke, never the address it resolved to', async () => {
      for (const [url, address] of [
        ['https://half.example.com/x', '10.1.2.3'],
        ['https://inside.example.com/x', '127.0.0.1'],
        ['https://metadata.example.com/x', '169.254.169.254'],
        ['https://v6local.example.com/x', '::1'],
      ] as const) {
        const v = await checkWebhookUrl(url, strict, dns);
        expect(v.ok, url).to.equal(false);
        if (!v.ok) {
          expect(v.message, url).to.match(/resolves to a private or internal address/);
          expect(v.message, url).to.not.include(address);
        }
      }
    });

    it('strips every trailing dot of a name before resolving it', async () => {
      const seen: string[] = [];
      const spy: Resolver = async (name) => (seen.push(name), ['93.184.216.34']);
      expect(await checkWebhookUrl('https://hooks.example.com.../x', strict, spy)).to.deep.equal({ ok: true });
      expect(seen).to.deep.equal(['hooks.example.com']);
    });

    it('allows 443, 8443 and the configured ports only; the development setting admits any port', async () => {
      const listed = { allowPrivate: false, allowedPorts: [[9443, 9443], [10000, 10100]] as [number, number][] };
      expect(await checkWebhookUrl('https://hooks.example.com:443/x', strict, dns)).to.deep.equal({ ok: true });
      expect(await checkWebhookUrl('https://hooks.example.com:8443/x', strict, dns)).to.deep.equal({ ok: true });
      expect(await checkWebhookUrl('https://hooks.example.com:9443/x', strict, dns)).to.include({ ok: false, reason: 'port' });
      expect(await checkWebhookUrl('https://hooks.example.com:9443/x', listed, dns)).to.deep.equal({ ok: true });
      expect(await checkWebhookUrl('https://hooks.example.com:10050/x', listed, dns)).to.deep.equal({ ok: true });
      const v = await checkWebhookUrl('https://hooks.example.com:10101/x', listed, dns);
      expect(v).to.include({ ok: false, reason: 'port' });
      if (!v.ok) expect(v.message).to.match(/port 10101 is not allowed/);
      expect(await checkWebhookUrl('https://127.0.0.1:3999/x', dev, dns)).to.deep.equal({ ok: true });
    });

    it('passes who asks to the resolver (the per-account cap)', async () => {
      let ctx: unknown;
      await checkWebhookUrl('https://hooks.example.com/x', strict, async (_n, c) => ((ctx = c), ['93.184.216.34']), { account: 'acct_1' });
      expect(ctx).to.deep.equal({ account: 'acct_1' });
    });

    it('with the development setting admits loopback and private targets but never metadata or multicast', async () => {
      expect(await checkWebhookUrl('https://127.0.0.1:8443/x', dev, dns)).to.deep.equal({ ok: true });
      expect(await checkWebhookUrl('https://localhost/x', dev, fakeDns({ localhost: ['127.0.0.1'] }))).to.deep.equal({ ok: true });
      expect(await checkWebhookUrl('https://192.168.1.4/x', dev, dns)).to.deep.equal({ ok: true });
      expect(await checkWebhookUrl('https://169.254.169.254/x', dev, dns)).to.include({ ok: false, reason: 'link_local' });
      expect(await checkWebhookUrl('https://224.0.0.1/x', dev, dns)).to.include({ ok: false, reason: 'multicast' });
      expect(await checkWebhookUrl('http://127.0.0.1/x', dev, dns)).to.include({ ok: false, reason: 'scheme' });
    });

    it('names WEBHOOK_ALLOW_PRIVATE_TARGETS when it is what refused the URL, and only then', async () => {
      const hint = /WEBHOOK_ALLOW_PRIVATE_TARGETS=true allows loopback and private targets in development/;
      for (const [url, resolver] of [
        ['https://127.0.0.1:8443/x', dns],
        ['https://10.0.0.7/x', dns],
        ['https://localhost/x', dns],
        ['https://inside.example.com/x', dns],
      ] as const) {
        const v = await checkWebhookUrl(url, strict, resolver);
        expect(v.ok ? 'accepted' : v.message, url).to.match(hint);
      }
      for (const url of ['https://169.254.169.254/x', 'https://224.0.0.1/x', 'http://127.0.0.1/x', 'https://hooks.example.com:9443/x']) {
        const v = await checkWebhookUrl(url, strict, dns);
        expect(v.ok ? 'accepted' : v.message, url).to.not.match(/WEBHOOK_ALLOW_PRIVATE_TARGETS/);
      }
    });

    it('passes a temporary DNS failure up instead of calling the host unresolvable', async () => {
      const flaky: Resolver = async () => {
        throw Object.assign(new Error('queryA EAI_AGAIN'), { code: 'EAI_AGAIN' });
      };
      let thrown: unknown;
      try {
        await checkWebhookUrl('https://hooks.example.com/x', strict, flaky);
      } catch (err) {
        thrown = err;
      }
      expect(thrown).to.have.property('code', 'EAI_AGAIN');
    });
  });

  it('redacts non-public addresses from error texts, keeps public ones and other colons', () => {
    expect(redactAddresses('connect ECONNREFUSED 10.0.0.7:443')).to.equal('connect ECONNREFUSED <internal address>:443');
    expect(redactAddresses('connect ECONNREFUSED [::ffff:127.0.0.1]:443 and fe80::1')).to.equal('connect ECONNREFUSED <internal address>:443 and <internal address>');
    expect(redactAddresses('connect ETIMEDOUT 93.184.216.34:443 at 12:34:56')).to.equal('connect ETIMEDOUT 93.184.216.34:443 at 12:34:56');
  });

  it('checkAddress applies the same policy to a dialled address', () => {
    expect(checkAddress('127.0.0.1', strict)).to.include({ ok: false, reason: 'loopback' });
    expect(checkAddress('127.0.0.1', dev)).to.deep.equal({ ok: true });
    expect(checkAddress('93.184.216.34', strict)).to.deep.equal({ ok: true });
  });
});
