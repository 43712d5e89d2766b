/**
 * The docs stay true to the repository: every relative link in README.md and
 * docs/*.md resolves to a file (and, with a #fragment, to a heading of it), and
 * docs/configuration.md lists exactly the environment variables the config
 * modules read (found by handing them an environment that records each read).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { loadApiConfig } from '../../api/src/config.js';
import { loadDeliveryConfig } from '../../delivery/src/config.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const DOCS = [join(ROOT, 'README.md'), ...readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => join(ROOT, 'docs', f))];

/** Markdown without its fenced code blocks and inline code spans (links there are examples, not links). */
function prose(md: string): string {
  return md.replace(/^```[\s\S]*?^```/gm, '').replace(/`[^`\n]*`/g, '');
}

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
export function anchorsOf(md: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const line of md.replace(/^```[\s\S]*?^```/gm, '').split('\n')) {
    const m = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!m) continue;
    const base = (m[1] as string).toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

describe('docs', () => {
  it('has every relative link in README.md and docs/ resolve to a file and heading', () => {
    const broken: string[] = [];
    let checked = 0;
    for (const file of DOCS) {
      const text = prose(readFileSync(file, 'utf8'));
      for (const m of text.matchAll(/!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
        const target = m[1] as string;
        if (/^[a-z]+:/i.test(target)) continue; // http(s), mailto: outside the repository
        checked++;
        const [path, fragment] = target.split('#') as [string, string | undefined];
        const dest = path === '' ? file : resolve(dirname(file), decodeURIComponent(path));
        if (!existsSync(dest)) {
          broken.push(`${file.slice(ROOT.length + 1)}: ${target} (no such file)`);
          continue;
        }
        if (fragment && dest.endsWith('.md') && !anchorsOf(readFileSync(dest, 'utf8')).has(fragment)) {
          broken.push(`${file.slice(ROOT.length + 1)}: ${target} (no such heading)`);
        }
      }
    }
    expect(checked, 'links checked').to.be.greaterThan(20);
    expect(broken).to.deep.equal([]);
  });

  it('keeps the README short enough to read in ten minutes', () => {
    const lines = readFileSync(join(ROOT, 'README.md'), 'utf8').split('\n').length;
    expect(lines).to.be.at.most(160);
  });

  it('lists in docs/configuration.md exactly the variables the config modules read', () => {
    const read = new Set<string>();
    const recording = (base: Record<string, string>) =>
      new Proxy(base, {
        get(target, key) {
          if (typeof key === 'string') read.add(key);
          return typeof key === 'string' ? target[key] : undefined;
        },
        has(target, key) {
          if (typeof key === 'string') read.add(key);
          return key in target;
        },
      });
    loadApiConfig(recording({ NODE_ENV: 'development' }));
    loadDeliveryConfig(recording({ NODE_ENV: 'development' }));
    const table = readFileSync(join(ROOT, 'docs', 'configuration.md'), 'utf8');
    const documented = new Set<string>();
    for (const line of table.split('\n')) {
      if (!line.startsWith('| `')) continue;
      const cell = line.split('|')[1] as string;
      for (const m of cell.matchAll(/`([A-Z][A-Z0-9_]+)`/g)) documented.add(m[1] as string);
    }
    const missing = [...read].filter((v) => !documented.has(v)).sort();
    const stale = [...documented].filter((v) => !read.has(v)).sort();
    expect({ missing, stale }).to.deep.equal({ missing: [], stale: [] });
  });
});

describe('docs: performance figures', () => {
  it('carries in docs/performance.md exactly the table generated from bench/results.json', async () => {
    // @ts-expect-error: a plain .mjs module without types
    const { renderResults, withResults } = await import('../bench/lib/results-table.mjs');
    const doc = readFileSync(join(ROOT, 'docs', 'performance.md'), 'utf8');
    const report = JSON.parse(readFileSync(join(ROOT, 'bench', 'results.json'), 'utf8'));
    expect(withResults(doc, renderResults(report)), 'run: node scripts/bench/table.mjs --write').to.equal(doc);
  });
});
