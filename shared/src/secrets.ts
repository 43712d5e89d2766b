/**
 * Webhook signing secrets must stay readable (the delivery process signs
 * with them and the API re-reveals them), so they are encrypted, not hashed:
 * AES-256-GCM under WEBHOOK_SECRET_KEY. The record id is bound in as
 * associated data, so a ciphertext copied onto another subscription fails to
 * open instead of signing with the wrong account's secret.
 *
 * Sealed form: `v1.` + base64(iv(12) | tag(16) | ciphertext). The version
 * prefix leaves room for key rotation.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

const VERSION = 'v1.';
const IV_BYTES = 12;
const TAG_BYTES = 16;

export class SecretBox {
  constructor(private readonly key: Buffer) {
    if (key.length !== 32) throw new Error('SecretBox needs a 32-byte key');
  }

  seal(plaintext: string, associatedData: string): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    cipher.setAAD(Buffer.from(associatedData));
    const ct = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return VERSION + Buffer.concat([iv, cipher.getAuthTag(), ct]).toString('base64');
  }

  /** Throws when the value was not sealed with this key for this record. */
  open(sealed: string, associatedData: string): string {
    if (!sealed.startsWith(VERSION)) throw new Error('unknown sealed secret format');
    const raw = Buffer.from(sealed.slice(VERSION.length), 'base64');
    if (raw.length < IV_BYTES + TAG_BYTES) throw new Error('sealed secret is truncated');
    const decipher = createDecipheriv('aes-256-gcm', this.key, raw.subarray(0, IV_BYTES));
    decipher.setAAD(Buffer.from(associatedData));
    decipher.setAuthTag(raw.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
    return Buffer.concat([decipher.update(raw.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8');
  }
}
