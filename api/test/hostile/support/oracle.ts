/**
 * What every answer to hostile input must look like, whatever the input was:
 * never a 5xx, never a stack trace or a dependency's own message, and every
 * 4xx a JSON error in the house shape with the request's id.
 */
import { ERROR_STATUS } from '../../../../shared/src/errors/index.js';

export interface Answer {
  status: number;
  headers: Headers;
  /** The raw body text. */
  text: string;
}

/**
 * Text that only turns up in a body when internals leak: stack frames, file
 * paths, driver and runtime error names, parser messages.
 */
const LEAKS: [string, RegExp][] = [
  ['stack frame', /\bat [\w$.<>]+ \(|\bat (?:file:|node:|\/)\S+:\d+:\d+/],
  ['source path', /(?:\/work\/|\/home\/|\/usr\/|\/app\/|node_modules|[\w-]+\.(?:ts|js|mjs|cjs):\d+)/],
  ['runtime error name', /\b(?:TypeError|RangeError|ReferenceError|SyntaxError|EvalError|AssertionError)\b/],
  ['driver error', /\b(?:Mongo\w*Error|BSON\w*|E11000|KafkaJS\w*|ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE)\b/],
  ['parser message', /Unexpected (?:token|end of JSON)|in JSON at position|Cannot read propert|is not a function|undefined is not|of undefined|of null\b/i],
  ['ajv internals', /\bschemaPath\b|#\/properties\//],
];

export function leakIn(text: string): string | null {
  for (const [what, re] of LEAKS) {
    const m = re.exec(text);
    if (m) return `${what}: ${JSON.stringify(text.slice(Math.max(0, m.index - 40), m.index + 80))}`;
  }
  return null;
}

const ERROR_KEYS = new Set(['code', 'message', 'request_id', 'details']);

/** Why `answer` breaks the rules, or null when it keeps them. */
export function violation(answer: Answer): string | null {
  const { status, headers, text } = answer;
  if (status >= 500) return `status ${status}: ${text.slice(0, 300)}`;
  // Static files (the dashboard's script) may say "TypeError"; what the API answers may not.
  const isJson = /^application\/json\b/.test(headers.get('content-type') ?? '');
  const leak = isJson || status >= 400 ? leakIn(text) : null;
  if (leak) return `leak (${leak})`;
  const requestId = headers.get('x-request-id');
  if (!requestId) return 'no X-Request-Id header';
  if (status < 400) return null;
  if (!isJson) return `${status} is not JSON (content-type ${headers.get('content-type')})`;
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return `${status} body is not parseable JSON: ${text.slice(0, 200)}`;
  }
  return errorShapeViolation(body, status, requestId);
}

function errorShapeViolation(body: unknown, status: number, requestId: string): string | null {
  const shape = JSON.stringify(body).slice(0, 300);
  if (!isObject(body) || Object.keys(body).length !== 1 || !isObject(body.error)) return `not {error:{…}}: ${shape}`;
  const err = body.error;
  const extra = Object.keys(err).filter((k) => !ERROR_KEYS.has(k));
  if (extra.length > 0) return `unexpected error fields ${extra.join(', ')}: ${shape}`;
  if (typeof err.code !== 'string' || !(err.code in ERROR_STATUS)) return `unknown error code: ${shape}`;
  if (ERROR_STATUS[err.code as keyof typeof ERROR_STATUS] !== status) return `code ${err.code} does not go with status ${status}`;
  if (typeof err.message !== 'string' || err.message === '') return `no message: ${shape}`;
  if (err.request_id !== requestId) return `request_id ${String(err.request_id)} differs from X-Request-Id ${requestId}`;
  if (err.details !== undefined) {
    const ok = Array.isArray(err.details) && err.details.length > 0 && err.details.every((d) => isObject(d) && typeof d.path === 'string' && typeof d.message === 'string' && Object.keys(d).length === 2);
    if (!ok) return `malformed details: ${shape}`;
  }
  return null;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Throws a readable error naming the request when the answer breaks the rules. */
export function assertSafe(answer: Answer, request: string): void {
  const problem = violation(answer);
  if (problem) throw new Error(`${request} -> ${problem}`);
}
