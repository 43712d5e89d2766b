/**
 * fast-check generators of hostile input: strings that break naive code,
 * JSON of every shape, mutations of a valid body, junk query strings,
 * header values and cursors.
 */
import fc from 'fast-check';
import { encodeCursor } from '#shared/cursor.js';

/** Strings that have broken real code: encodings, invisible and oversized characters, injection-shaped text. */
export const NASTY_STRINGS: string[] = [
  '',
  ' ',
  '\u0000',
  'a\u0000b',
  '\t\r\n',
  '\u2028\u2029',
  '\uFEFFbom',
  '\u202Eevil\u202C',
  '\u200B\u200C\u200D\u2060',
  'e\u0301\u0301\u0301\u0301\u0301',
  'Z̷̡̛̖̗͓̦̮͕̈́͋͌̓͐͘a̸̧̛̰͖̺̪̖̍̐̈́l̵̨̗̺̪̑̊̈́ǧ̶̛̩͔̜̆̿o̴̢̰̙͊',
  '👩‍👩‍👧‍👦🏳️‍🌈',
  '𝕳𝖊𝖑𝖑𝖔',
  '\uD800',
  '\uDFFF\uD800',
  'ﷺ',
  '\u0130\u0131', // Turkish dotted/dotless i: case mapping changes length
  'ß'.repeat(50),
  'ﬃ'.repeat(30),
  '\\',
  '"',
  "'; DROP TABLE users; --",
  '{"$gt": ""}',
  '$where',
  '$gt',
  'a.b',
  '__proto__',
  'constructor',
  '<script>alert(1)</script>',
  '../../../../etc/passwd',
  '%00%0d%0a',
  '${jndi:ldap://x}',
  '{{7*7}}',
  'x'.repeat(10_000),
  '𝕏'.repeat(3_000),
  '9'.repeat(400),
  '-0',
  'NaN',
  'Infinity',
  'null',
  'true',
  '1e309',
];

/** Keys that reach prototypes or operators when code is careless. */
export const NASTY_KEYS = ['__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', '$gt', '$where', 'a.b', '', ' ', '\u0000', '𝕏', 'x'.repeat(300)];

export const nastyString = (): fc.Arbitrary<string> =>
  fc.oneof(
    { weight: 3, arbitrary: fc.constantFrom(...NASTY_STRINGS) },
    { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 80 }) },
    { weight: 1, arbitrary: fc.string({ unit: 'grapheme', maxLength: 40 }) },
  );

const nastyNumber = (): fc.Arbitrary<number> =>
  fc.oneof(fc.constantFrom(0, -0, -1, 1.5, 2 ** 31, 2 ** 53, -(2 ** 53), 1e308, -1e308, 5e-324, Number.MAX_SAFE_INTEGER + 2), fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }));

/** Any JSON value, biased to nasty leaves, with nasty keys in objects. */
export const hostileJson = (maxDepth = 4): fc.Arbitrary<unknown> =>
  fc.letrec((tie) => ({
    leaf: fc.oneof(nastyString(), nastyNumber(), fc.boolean(), fc.constant(null)),
    node: fc.oneof(
      { depthSize: 'small', maxDepth },
      { weight: 4, arbitrary: tie('leaf') },
      { weight: 1, arbitrary: fc.array(tie('node'), { maxLength: 5 }) },
      { weight: 1, arbitrary: fc.dictionary(fc.oneof(fc.constantFrom(...NASTY_KEYS), fc.string({ maxLength: 12 })), tie('node'), { maxKeys: 5 }) },
    ),
  })).node;

/**
 * Mutations of a valid body: one field replaced by anything, a field dropped,
 * an unknown (or prototype-reaching) field added, or the whole body swapped
 * for another JSON value. Also the valid body itself, now and then.
 */
export function mutatedBody(valid: fc.Arbitrary<Record<string, unknown>>, fields: string[]): fc.Arbitrary<unknown> {
  const field = fields.length > 0 ? fc.constantFrom(...fields) : fc.constant('x');
  return fc.oneof(
    { weight: 1, arbitrary: valid },
    { weight: 4, arbitrary: fc.tuple(valid, field, hostileJson(3)).map(([b, k, v]) => ({ ...b, [k]: v })) },
    { weight: 1, arbitrary: fc.tuple(valid, field).map(([b, k]) => Object.fromEntries(Object.entries(b).filter(([key]) => key !== k))) },
    { weight: 2, arbitrary: fc.tuple(valid, fc.oneof(fc.constantFrom(...NASTY_KEYS), fc.string({ maxLength: 20 })), hostileJson(2)).map(([b, k, v]) => withOwnKey(b, k, v)) },
    { weight: 2, arbitrary: hostileJson(4) },
  );
}

/** Adds a key as an own property even when it is "__proto__" (a plain assignment would set the prototype). */
function withOwnKey(body: Record<string, unknown>, key: string, value: unknown): Record<string, unknown> {
  const out = { ...body };
  Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
  return out;
}

/** JSON texts that are not what a parser expects: broken, top-level scalars, duplicates, odd whitespace. */
export const rawJsonText = (): fc.Arbitrary<string> =>
  fc.oneof(
    fc.constantFrom('', '{', '}', '[', '{"a":', '{"a":1,}', "{'a':1}", '{"a":1}{"b":2}', '{"a":1} x', 'null', 'true', '1', '"x"', '[]', '[[[[', '{"__proto__":{"isAdmin":true}}', '{"a":1,"a":2}', '\uFEFF{}', '{"a":"\\ud800"}', '{"a":"\\u0000"}', '{"a":1e999}', '{"a":-}', 'NaN', '{\u00a0}'),
    fc.string({ unit: 'binary', maxLength: 200 }),
    fc.tuple(fc.json({ maxDepth: 3 }), fc.constantFrom('', ' ', ',', '}', ']', '"')).map(([json, tail]) => json + tail),
  );

/** A query string (without "?") of junk names and values, with repeats and odd encodings. */
export const junkQuery = (names: string[]): fc.Arbitrary<string> => {
  const name = fc.oneof(fc.constantFrom(...names, ...NASTY_KEYS), fc.string({ maxLength: 10 }));
  const value = fc.oneof(nastyString(), fc.constantFrom('%', '%zz', '%00', '%ff%fe', '+', '&&', '==', '[]', '[a]=1'));
  const pair = fc.tuple(name, value, fc.boolean()).map(([n, v, raw]) => (raw ? `${n}=${v}` : `${encodeURIComponent(n)}=${safeEncode(v)}`));
  return fc.oneof(fc.array(pair, { maxLength: 6 }).map((p) => p.join('&')), fc.webQueryParameters());
};

/** encodeURIComponent throws on lone surrogates; those are sent as their replacement. */
function safeEncode(v: string): string {
  return encodeURIComponent(Buffer.from(v, 'utf8').toString('utf8'));
}

/** Header values fetch can send: no CR, LF or NUL, no surrounding whitespace, bytes up to 0xFF. */
export const headerValue = (): fc.Arbitrary<string> =>
  fc
    .oneof(
      fc.string({ unit: fc.integer({ min: 0x20, max: 0xff }).filter((c) => c !== 0x7f).map((c) => String.fromCharCode(c)), maxLength: 200 }),
      fc.constantFrom('Bearer', 'Bearer ', 'Bearer  x', 'bearer svc_', 'Basic dXNlcjpwYXNz', 'Bearer svcst_', 'Bearer eyJ.eyJ.x', 'Bearer a b', 'x'.repeat(8000)),
      fc.string({ unit: 'grapheme-ascii', maxLength: 60 }).map((s) => `Bearer ${s}`),
    )
    .map((s) => s.trim());

/**
 * Cursors: malformed strings, well-formed cursors of arbitrary (partition,
 * offset) pairs including past int64, non-canonical spellings of real ones.
 */
export const hostileCursor = (partitions: number): fc.Arbitrary<string> =>
  fc.oneof(
    nastyString(),
    fc.tuple(fc.nat({ max: partitions + 2 }), fc.bigInt({ min: 0n, max: 10n ** 19n - 1n })).map(([p, o]) => encodeCursor({ partition: p, offset: o })),
    fc.tuple(fc.integer({ min: -5, max: 20_000 }), fc.string({ unit: 'grapheme-ascii', maxLength: 24 })).map(([p, o]) => 'c1_' + Buffer.from(`${p}.${o}`).toString('base64url')),
    fc.string({ unit: 'grapheme-ascii', maxLength: 70 }).map((s) => 'c1_' + s),
    fc.constantFrom('c1_', 'c1_MC4w', 'c1_MC4w=', 'c1_MC4wMA', 'C1_MC4w', 'c1_' + 'A'.repeat(61), 'c2_MC4w'),
  );
