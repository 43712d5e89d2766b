import type { Resolver } from '../../src/url-safety.js';

/**
 * A DNS for tests: names in `records` answer their addresses (which a test may
 * change at any time, to play DNS rebinding); unknown names do not exist.
 */
export class FakeDns {
  readonly records = new Map<string, string[]>();
  readonly lookups: string[] = [];

  set(name: string, addresses: string[]): this {
    this.records.set(name, addresses);
    return this;
  }

  readonly resolve: Resolver = async (name) => {
    this.lookups.push(name);
    const found = this.records.get(name);
    if (!found) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${name}`), { code: 'ENOTFOUND' });
    return found;
  };
}
