/**
 * What every answer to hostile input must look like, whatever the input was:
 * never a 5xx, never a stack trace or a dependency's own message, and every
 * 4xx a JSON error in the house shape with the request's id.
 */
import { ERROR_STATUS } from '#shared/errors/index.js';

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
  ['driver error', /\b(?:Mongo\w*Error|BSON\w*|E11000|KafkaJS\w*|ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE|ENOTFOUND|EAI_AGAIN|getaddrinfo)\b|Topology is closed|Server selection timed out|connection \d+ to|Connection timeout/],
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

export interface Shape {
  /** The endpoint answers in JSON-RPC (MCP): errors are JSON-RPC error objects. */
  jsonRpc?: boolean;
}

/** Why `answer` breaks the rules, or null when it keeps them. */
export function violation(answer: Answer, shape: Shape = {}): string | null {
  const { status, headers, text } = answer;
  if (status >= 500) return `status ${status}: ${text.slice(0, 300)}`;
  // Static files (the dashboard's script) may say "TypeError"; what the API answers may not.
  const isJson = /^application\/json\b/.test(headers.get('content-type') ?? '');
  const leak = isJson || status >= 400 ? leakIn(text) : null;
  if (leak) return `leak (${leak})`;
  const requestId = headers.get('x-request-id');
  if (!requestId) return 'no X-Request-Id header';
  if (shape.jsonRpc) return jsonRpcViolation(answer, requestId);
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

/**
 * JSON-RPC answers: an HTTP refusal (4xx) carries one error object whose data
 * has the house code and the request id; a 200 may carry per-request errors,
 * but never -32603 (an internal error: the JSON-RPC face of a 500).
 */
function jsonRpcViolation(answer: Answer, requestId: string): string | null {
  const { status, text } = answer;
  if (status === 202 || status === 204) return null;
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return `${status} body is not JSON: ${text.slice(0, 200)}`;
  }
  // Refused before the route (by Node's parser or the body limit): the house shape.
  if (isObject(body) && body.jsonrpc === undefined && status >= 400) return errorShapeViolation(body, status, requestId);
  const messages = Array.isArray(body) ? body : [body];
  for (const m of messages) {
    if (!isObject(m) || m.jsonrpc !== '2.0') return `not a JSON-RPC message: ${text.slice(0, 200)}`;
    if (m.error === undefined) continue;
    if (!isObject(m.error) || !Number.isInteger(m.error.code) || typeof m.error.message !== 'string') return `malformed JSON-RPC error: ${text.slice(0, 200)}`;
    if (m.error.code === -32603) return `internal error inside a ${status}: ${text.slice(0, 200)}`;
  }
  if (status < 400) return null;
  const err = (body as { error?: { data?: { code?: unknown; request_id?: unknown } } }).error;
  if (Array.isArray(body) || !err) return `${status} without one JSON-RPC error: ${text.slice(0, 200)}`;
  if (typeof err.data?.code !== 'string' || !(err.data.code in ERROR_STATUS) && !['not_acceptable'].includes(err.data.code)) return `${status} error data without a house code: ${text.slice(0, 200)}`;
  if (err.data.request_id !== requestId) return `${status} error data request_id ${String(err.data.request_id)} differs from X-Request-Id ${requestId}`;
  return null;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Throws a readable error naming the request when the answer breaks the rules. */
export function assertSafe(answer: Answer, request: string, shape: Shape = {}): void {
  const problem = violation(answer, shape);
  if (problem) throw new Error(`${request} -> ${problem}`);
}
