/**
 * `npm ci` (what CI runs) refuses a package-lock.json that is out of step with
 * package.json, and also one that leaves out an optional dependency of a locked
 * package: npm writes a lock without the entries it could not fetch (a registry
 * mirror that carries only some platforms' binaries), `npm install` accepts that
 * lock, and `npm ci` then fails in a second with "Missing: … from lock file".
 * This is the check npm ci makes, run in milliseconds by `npm run test:unit`.
 */
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

interface LockedPackage {
  version?: string;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
}

const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, LockedPackage> };
const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as LockedPackage;

/** Where node (and npm) finds `name` required from the package at `from`: its own node_modules, then each parent's. */
function locate(from: string, name: string): string | undefined {
  let base = from;
  for (;;) {
    const candidate = base === '' ? `node_modules/${name}` : `${base}/node_modules/${name}`;
    if (lock.packages[candidate]) return candidate;
    if (base === '') return undefined;
    const cut = base.lastIndexOf('/node_modules/');
    base = cut < 0 ? '' : base.slice(0, cut);
  }
}

describe('package-lock.json', () => {
  it('locks every dependency and devDependency package.json names', () => {
    const named = { ...manifest.dependencies, ...manifest.devDependencies };
    const missing = Object.keys(named).filter((name) => !lock.packages[`node_modules/${name}`]);
    expect(missing, 'run npm install and commit package-lock.json').to.deep.equal([]);
    expect(Object.keys(named).length).to.be.greaterThan(5);
  });

  it('has an entry for every optional dependency of every locked package (npm ci refuses the lock otherwise)', () => {
    const missing: string[] = [];
    let checked = 0;
    for (const [path, pkg] of Object.entries(lock.packages)) {
      if (path === '' || !path.includes('node_modules/')) continue;
      for (const name of Object.keys(pkg.optionalDependencies ?? {})) {
        checked++;
        if (!locate(path, name)) missing.push(`${path} -> ${name}`);
      }
    }
    expect(missing, 'the registry lacks these packages: pick a version of the parent that does not need them').to.deep.equal([]);
    expect(checked).to.be.greaterThan(10);
  });
});
