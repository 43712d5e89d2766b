// Accounts of a bench scenario, created once through the public API and reused
// within the scenario (they live in its database: each scenario has its own).
import { createAccounts } from './http.mjs';

export async function ensureAccounts(ctx, apiUrl, count) {
  const key = `accounts:${ctx.db}`;
  const accounts = (ctx.shared[key] ??= []);
  const have = accounts.length;
  if (have < count) {
    const t0 = Date.now();
    const more = await createAccounts(apiUrl, count - have, { prefix: `bench-${ctx.runId}-${ctx.scenario}-${have}`, concurrency: 16 });
    accounts.push(...more);
    ctx.log(`created ${more.length} accounts through the API in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  }
  return accounts.slice(0, count);
}

export function split(items, parts) {
  const out = Array.from({ length: parts }, () => []);
  items.forEach((item, i) => out[i % parts].push(item));
  return out;
}
