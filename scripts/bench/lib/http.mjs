// Small HTTP helpers for the parent process (setup and checks, not load).
export async function call(base, method, path, { body, headers = {}, timeoutMs } = {}) {
  const res = await fetch(base + path, {
    method,
    signal: timeoutMs ? AbortSignal.timeout(timeoutMs) : undefined,
    headers: { ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
    body: body !== undefined ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  let json;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = text;
  }
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text.slice(0, 300)}`);
  return json;
}

/** Runs `fn` over `items` with at most `limit` at once; results in input order. */
export async function pool(items, limit, fn) {
  const out = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i], i);
      }
    }),
  );
  return out;
}

/**
 * Signs up `count` accounts through the public API and gives each an API key
 * (what an integration uses). Returns [{ id, key, token }].
 */
export async function createAccounts(base, count, { prefix, concurrency = 8 }) {
  return pool(Array.from({ length: count }, (_, i) => i), concurrency, async (i) => {
    const email = `${prefix}-${i}@bench.example.com`;
    const signup = await call(base, 'POST', '/api/auth/signup', { body: { email, name: `Bench ${i}`, password: 'bench-password-1234' } });
    const key = await call(base, 'POST', '/api/auth/api-key', { headers: { authorization: `Bearer ${signup.token}` } });
    return { id: signup.user.id, key: key.api_key, token: signup.token };
  });
}
