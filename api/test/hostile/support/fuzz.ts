/** Running a bounded fast-check property against live API processes, counted for the report. */
import fc from 'fast-check';
import type { RunningApi } from '../../../src/server.js';
import { endpointName, type Endpoint, type Fixture } from './endpoints.js';
import { describeRequest, send } from './http.js';
import { assertSafe } from './oracle.js';
import { fuzzCaseArb, type FuzzCase } from './requests.js';
import { counting } from './tally.js';

/** FUZZ_SEED replays a failing run (fast-check prints the seed); FUZZ_SCALE multiplies every run count. */
export const FUZZ_SEED = process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : undefined;
const FUZZ_SCALE = Number(process.env.FUZZ_SCALE ?? '1');

export const runsOf = (n: number): number => Math.max(1, Math.round(n * FUZZ_SCALE));

/** Client patience for endpoints that hold requests open: a refusal comes sooner; a case still open then is abandoned. */
const HOLD_OPEN_PATIENCE_MS = 500;

/**
 * Runs `runs` cases of `arb` through `check`, counting them under `label`.
 * Failures shrink to a minimal case and name the seed.
 */
export async function fuzz<T>(label: string, runs: number, arb: fc.Arbitrary<T>, check: (value: T) => Promise<void>): Promise<void> {
  await counting('fuzz', label, async (tick) => {
    await fc.assert(
      fc.asyncProperty(arb, async (value) => {
        tick();
        await check(value);
      }),
      { numRuns: runsOf(runs), seed: FUZZ_SEED, endOnFailure: false, interruptAfterTimeLimit: 120_000 },
    );
  });
}

/** Checks one fuzz case: safe answer, and a tampered credential never gets through. */
export async function checkCase(api: RunningApi, ep: Endpoint, req: FuzzCase): Promise<void> {
  const res = await send(api.url, { ...req, timeoutMs: ep.holdsOpen ? HOLD_OPEN_PATIENCE_MS : 15_000 });
  if (!res) {
    if (ep.holdsOpen) return; // still waiting, as a long-poll may: abandoned
    throw new Error(`${describeRequest(req)} -> no answer`);
  }
  assertSafe(res, describeRequest(req), { jsonRpc: ep.jsonRpc });
  if (req.credentialTampered && res.status < 400) {
    throw new Error(`${describeRequest(req)} -> ${res.status} with a tampered credential`);
  }
}

export function fuzzEndpoint(apis: () => [RunningApi, RunningApi], ep: Endpoint, fixture: () => Promise<Fixture>, ingestToken: string): () => Promise<void> {
  return async () => {
    const f = await fixture();
    const [a, b] = apis();
    let n = 0;
    await fuzz(endpointName(ep), ep.runs, fuzzCaseArb(ep, f, ingestToken), async (req) => {
      n += 1;
      await checkCase(n % 2 === 0 ? a : b, ep, req);
    });
  };
}
