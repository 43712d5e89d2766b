import { expect } from 'chai';
import { hashPassword, isWeaker, PasswordHasher, SCRYPT_PARAMS, scryptMemory, verifyPassword } from './passwords.js';

/** Cheap parameters for the behaviour tests; the first test runs the real default. */
const fast = new PasswordHasher({ ...SCRYPT_PARAMS, N: 1024 }, 4);

describe('password hashing', () => {
  it('hashes at the OWASP floor by default (N=2^17, r=8, p=1: more memory than Node allows scrypt by default) and verifies', async function () {
    this.timeout(30_000);
    expect(SCRYPT_PARAMS).to.deep.equal({ N: 131072, r: 8, p: 1, keylen: 64 });
    expect(scryptMemory(SCRYPT_PARAMS)).to.be.greaterThan(128 * 1024 * 1024);
    const stored = await hashPassword('correct horse battery');
    expect(stored).to.include({ algo: 'scrypt', N: 131072, r: 8, p: 1, keylen: 64 });
    expect(Buffer.from(stored.salt, 'base64')).to.have.length(16);
    expect(Buffer.from(stored.hash, 'base64')).to.have.length(64);
    expect(JSON.stringify(stored)).to.not.include('correct horse');
    expect(await verifyPassword('correct horse battery', stored)).to.equal(true);
    expect(await verifyPassword('correct horse batterY', stored)).to.equal(false);
  });

  it('salts every hash differently', async () => {
    const [a, b] = await Promise.all([fast.hash('same password'), fast.hash('same password')]);
    expect(a.salt).to.not.equal(b.salt);
    expect(a.hash).to.not.equal(b.hash);
  });

  it('accepts the right password and refuses a wrong one', async () => {
    const stored = await fast.hash('s3cret-passw0rd');
    expect(await fast.verify('s3cret-passw0rd', stored)).to.equal(true);
    expect(await fast.verify('s3cret-passw0rd ', stored)).to.equal(false);
    expect(await fast.verify('S3cret-passw0rd', stored)).to.equal(false);
  });

  it('verifies with the parameters stored beside the hash, whatever the hasher is configured with', async () => {
    const old = await new PasswordHasher({ ...SCRYPT_PARAMS, N: 2048 }).hash('parameters travel');
    expect(old).to.include({ N: 2048 });
    expect(await fast.verify('parameters travel', old)).to.equal(true);
    // The same bytes claimed to be made with other parameters do not verify.
    expect(await fast.verify('parameters travel', { ...old, N: 1024 })).to.equal(false);
  });

  it('marks a hash with weaker stored parameters for upgrade, and only those', async () => {
    const target = { ...SCRYPT_PARAMS, N: 4096 };
    const hasher = new PasswordHasher(target);
    const weak = await fast.hash('upgrade me');
    expect(hasher.needsUpgrade(weak)).to.equal(true);
    expect(hasher.needsUpgrade(await hasher.hash('current'))).to.equal(false);
    expect(isWeaker({ ...weak, N: 8192 }, target)).to.equal(false);
    expect(isWeaker({ ...weak, N: 8192, r: 4 }, target)).to.equal(true);
    expect(isWeaker({ ...weak, N: 4096, keylen: 32 }, target)).to.equal(true);
  });

  it('treats canonically equal Unicode passwords as the same', async () => {
    const stored = await fast.hash('caf\u00e9-password');
    expect(await fast.verify('cafe\u0301-password', stored)).to.equal(true);
  });

  it('refuses a tampered hash', async () => {
    const stored = await fast.hash('tamper-proof');
    const bytes = Buffer.from(stored.hash, 'base64');
    bytes[0] = (bytes[0] ?? 0) ^ 1;
    expect(await fast.verify('tamper-proof', { ...stored, hash: bytes.toString('base64') })).to.equal(false);
    expect(await fast.verify('tamper-proof', { ...stored, hash: bytes.subarray(1).toString('base64') })).to.equal(false);
  });

  it('answers false for an unknown user after doing the same work', async () => {
    expect(await fast.verifyAgainstDummy('any password')).to.equal(false);
  });

  it('makes the dummy hash once, ahead of the first unknown-email login', async () => {
    const hasher = new PasswordHasher({ ...SCRYPT_PARAMS, N: 1024 });
    const original = hasher.hash.bind(hasher);
    let hashes = 0;
    hasher.hash = (password) => {
      hashes++;
      return original(password);
    };
    await hasher.prepareDummy();
    expect(hashes).to.equal(1);
    expect(await hasher.verifyAgainstDummy('x')).to.equal(false);
    expect(await hasher.verifyAgainstDummy('y')).to.equal(false);
    expect(hashes).to.equal(1);
  });

  it('runs at most maxConcurrent derivations at once and queues the rest', async () => {
    const hasher = new PasswordHasher({ ...SCRYPT_PARAMS, N: 1024 }, 2);
    let peak = 0;
    const probe = setInterval(() => (peak = Math.max(peak, hasher.load.running)), 0);
    const all = Promise.all(Array.from({ length: 8 }, (_, i) => hasher.hash(`pw-${i}`)));
    expect(hasher.load).to.deep.equal({ running: 2, waiting: 6 });
    const hashes = await all;
    clearInterval(probe);
    expect(hashes).to.have.length(8);
    expect(peak).to.be.at.most(2);
    expect(hasher.load).to.deep.equal({ running: 0, waiting: 0 });
  });

  it('refuses a derivation with 503 and Retry-After when maxWaiting are already queued', async () => {
    const hasher = new PasswordHasher({ ...SCRYPT_PARAMS, N: 1024 }, 1, 2);
    const queued = [hasher.hash('a'), hasher.hash('b'), hasher.hash('c')];
    expect(hasher.load).to.deep.equal({ running: 1, waiting: 2 });
    const refused = await hasher.verifyAgainstDummy('d').then(
      () => null,
      (err: unknown) => err as { status: number; headers: Record<string, string> },
    );
    expect(refused?.status).to.equal(503);
    expect(refused?.headers['Retry-After']).to.equal('1');
    await Promise.all(queued);
    expect(await hasher.verify('a', await hasher.hash('a'))).to.equal(true);
    // The refused first dummy does not poison later unknown-email logins.
    expect(await hasher.verifyAgainstDummy('e')).to.equal(false);
  });
});
