// Accounts of a bench run, created once through the public API and reused by
// the scenarios that need them (they live in the run's database).
import { createAccounts } from './http.mjs';

export async function ensureAccounts(ctx, apiUrl, count) {
  ctx.shared.accounts ??= [];
  const have = ctx.shared.accounts.length;
  if (have < count) {
    const t0 = Date.now();
    const more = await createAccounts(apiUrl, count - have, { prefix: `bench-${ctx.runId}-${have}`, concurrency: 16 });
    ctx.shared.accounts.push(...more);
    ctx.log(`created ${more.length} accounts through the API in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  }
  return ctx.shared.accounts.slice(0, count);
}

export function split(items, parts) {
  const out = Array.from({ length: parts }, () => []);
  items.forEach((item, i) => out[i % parts].push(item));
  return out;
}
