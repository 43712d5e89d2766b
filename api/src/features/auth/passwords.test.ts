import { expect } from 'chai';
import { hashPassword, SCRYPT_PARAMS, verifyAgainstDummy, verifyPassword } from './passwords.js';

describe('password hashing', () => {
  it('stores scrypt with a 16-byte salt and its parameters, never the password', async () => {
    const stored = await hashPassword('correct horse battery');
    expect(stored).to.include({ algo: 'scrypt', N: 16384, r: 8, p: 1, keylen: 64 });
    expect(Buffer.from(stored.salt, 'base64')).to.have.length(16);
    expect(Buffer.from(stored.hash, 'base64')).to.have.length(SCRYPT_PARAMS.keylen);
    expect(JSON.stringify(stored)).to.not.include('correct horse');
  });

  it('salts every hash differently', async () => {
    const [a, b] = await Promise.all([hashPassword('same password'), hashPassword('same password')]);
    expect(a.salt).to.not.equal(b.salt);
    expect(a.hash).to.not.equal(b.hash);
  });

  it('accepts the right password and refuses a wrong one', async () => {
    const stored = await hashPassword('s3cret-passw0rd');
    expect(await verifyPassword('s3cret-passw0rd', stored)).to.equal(true);
    expect(await verifyPassword('s3cret-passw0rd ', stored)).to.equal(false);
    expect(await verifyPassword('S3cret-passw0rd', stored)).to.equal(false);
  });

  it('verifies with the parameters stored beside the hash', async () => {
    const stored = await hashPassword('parameters travel');
    // A hash made with different cost settings must still verify with its own.
    expect(await verifyPassword('parameters travel', { ...stored, N: 1024 })).to.equal(false);
    expect(await verifyPassword('parameters travel', { ...stored })).to.equal(true);
  });

  it('treats canonically equal Unicode passwords as the same', async () => {
    const stored = await hashPassword('caf\u00e9-password');
    expect(await verifyPassword('cafe\u0301-password', stored)).to.equal(true);
  });

  it('refuses a tampered hash', async () => {
    const stored = await hashPassword('tamper-proof');
    const bytes = Buffer.from(stored.hash, 'base64');
    bytes[0] = (bytes[0] ?? 0) ^ 1;
    expect(await verifyPassword('tamper-proof', { ...stored, hash: bytes.toString('base64') })).to.equal(false);
    expect(await verifyPassword('tamper-proof', { ...stored, hash: bytes.subarray(1).toString('base64') })).to.equal(false);
  });

  it('answers false for an unknown user after doing the same work', async () => {
    expect(await verifyAgainstDummy('any password')).to.equal(false);
  });
});
