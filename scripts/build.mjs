#!/usr/bin/env node
// `npm run build`: compiles api/, delivery/ and shared/ into dist/ (tsconfig.build.json), copies the
// dashboard's static files beside the compiled code, and writes dist/package.json. That file makes
// dist/ its own package scope, so the compiled code's subpath imports (`#shared/...`) resolve to the
// compiled files in dist/shared/src/, not to the TypeScript sources the root package.json points at:
// the same "imports" map, read from the root package.json, taken relative to dist/.
import { execFileSync } from 'node:child_process';
import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const dist = join(root, 'dist');
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
execFileSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json')], { cwd: root, stdio: 'inherit' });

cpSync(join(root, 'api/src/features/dashboard/static'), join(dist, 'api/src/features/dashboard/static'), { recursive: true });

const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
// Only the production map: test support is never compiled into dist/.
const imports = { '#shared/*': pkg.imports['#shared/*'] };
writeFileSync(join(dist, 'package.json'), `${JSON.stringify({ private: true, type: pkg.type, imports }, null, 2)}\n`);
