/**
 * The query-shape check: which index MongoDB would answer each query from.
 * FerretDB (the test server) scans every collection whatever its indexes, so
 * a query without an index is invisible in the tests; this module makes the
 * claim "every query has its index" checked instead. The tests' processes
 * record each (collection, filter fields, sort) their MongoDB clients send
 * (recordQueryShapes, enabled by MONGO_QUERY_SHAPES_DIR, which only the test
 * harness sets), each with the index that serves it under the prefix rule
 * (servingIndex) or the allow-list entry that excuses it; `npm test` fails
 * when a recorded shape has neither (scripts/test.mjs).
 */
import { appendFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { CommandStartedEvent, Document, IndexDescription, MongoClient } from 'mongodb';

/** One query as an index sees it: the fields it fixes, the fields it bounds, and its order. */
export interface QueryShape {
  collection: string;
  /** Fields compared for equality ({f: v}, $eq, $in), sorted by name. */
  equality: string[];
  /** Fields bounded otherwise ($gt/$gte/$lt/$lte, $ne, $nin, $exists, $regex, ...), sorted by name. */
  range: string[];
  /** The sort, in order; 1 ascending, -1 descending. */
  sort: [string, 1 | -1][];
}

interface Branch {
  equality: Set<string>;
  range: Set<string>;
}

/** Operators an index cannot bound: the field is checked on each fetched document. */
const UNBOUNDED_OPERATORS = new Set(['$size', '$mod', '$where', '$expr', '$all', '$not', '$bitsAllSet', '$bitsAnySet', '$bitsAllClear', '$bitsAnyClear']);

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value) && (value as object).constructor === Object;
}

function merge(a: Branch, b: Branch): Branch {
  return { equality: new Set([...a.equality, ...b.equality]), range: new Set([...a.range, ...b.range]) };
}

function cross(as: Branch[], bs: Branch[]): Branch[] {
  return as.flatMap((a) => bs.map((b) => merge(a, b)));
}

/**
 * A filter as the planner sees it: one branch per alternative of its `$or`s
 * (MongoDB plans each branch on its own index), each with the fields it
 * fixes and the fields it bounds. `$and` is flattened; `$nor`, `$expr` and
 * the like bound nothing.
 */
function branchesOf(filter: unknown): Branch[] {
  let branches: Branch[] = [{ equality: new Set(), range: new Set() }];
  if (!isPlainObject(filter)) return branches;
  for (const [field, value] of Object.entries(filter)) {
    if (field === '$and' && Array.isArray(value)) {
      for (const clause of value) branches = cross(branches, branchesOf(clause));
    } else if (field === '$or' && Array.isArray(value)) {
      branches = cross(
        branches,
        value.flatMap((clause) => branchesOf(clause)),
      );
    } else if (field.startsWith('$')) {
      continue; // $nor, $expr, $where, $text, $comment: no bound on any field
    } else if (isPlainObject(value) && Object.keys(value).some((k) => k.startsWith('$'))) {
      const ops = Object.keys(value);
      if (ops.every((op) => op === '$eq' || op === '$in')) {
        for (const b of branches) b.equality.add(field);
      } else if (ops.some((op) => !UNBOUNDED_OPERATORS.has(op) && op !== '$options')) {
        for (const b of branches) b.range.add(field);
      }
    } else {
      for (const b of branches) b.equality.add(field);
    }
  }
  return branches;
}

/** A sort as the driver sends it (a Map in find and findAndModify, an object in $sort). */
function sortOf(sort: unknown): [string, 1 | -1][] {
  const entries = sort instanceof Map ? [...(sort as Map<string, unknown>).entries()] : isPlainObject(sort) ? Object.entries(sort) : [];
  return entries.filter(([field]) => !field.startsWith('$')).map(([field, dir]) => [field, dir === -1 || dir === 'desc' || dir === 'descending' ? -1 : 1]);
}

function shapesOf(collection: unknown, filter: unknown, sort: unknown): QueryShape[] {
  if (typeof collection !== 'string') return [];
  const order = sortOf(sort);
  return branchesOf(filter).map((b) => ({ collection, equality: [...b.equality].sort(), range: [...b.range].sort(), sort: order }));
}

/** The leading $match stages of a pipeline, and the $sort right after them. */
function pipelineShapes(collection: unknown, pipeline: unknown): QueryShape[] {
  if (!Array.isArray(pipeline)) return [];
  const matches: unknown[] = [];
  let i = 0;
  while (isPlainObject(pipeline[i]) && (pipeline[i] as Document).$match !== undefined) matches.push((pipeline[i++] as Document).$match);
  const sort = isPlainObject(pipeline[i]) ? (pipeline[i] as Document).$sort : undefined;
  return shapesOf(collection, { $and: matches }, sort);
}

/**
 * The query shapes one command sends: a find, count, distinct, aggregate,
 * findAndModify, or each statement of an update or delete (a `$or` gives a
 * shape per branch). Inserts and every other command read nothing by filter.
 */
export function commandShapes(commandName: string, command: Document): QueryShape[] {
  const collection = command[commandName];
  switch (commandName) {
    case 'find':
      return shapesOf(collection, command.filter, command.sort);
    case 'count':
    case 'distinct':
      return shapesOf(collection, command.query, undefined);
    case 'findAndModify':
      return shapesOf(collection, command.query, command.sort);
    case 'aggregate':
      return pipelineShapes(collection, command.pipeline);
    case 'update':
      return ((command.updates as Document[] | undefined) ?? []).flatMap((u) => shapesOf(collection, u.q, u.sort));
    case 'delete':
      return ((command.deletes as Document[] | undefined) ?? []).flatMap((d) => shapesOf(collection, d.q, undefined));
    default:
      return [];
  }
}

/** The shape as one line of text: `collection {eq: a,b; range: c; sort: d:-1}`; also its identity. */
export function describeShape(shape: QueryShape): string {
  const parts = [`eq: ${shape.equality.join(',') || '-'}`, `range: ${shape.range.join(',') || '-'}`, `sort: ${shape.sort.map(([f, d]) => `${f}:${d}`).join(',') || '-'}`];
  return `${shape.collection} {${parts.join('; ')}}`;
}

/** Whether a shape's filter implies a partial index's filter (each field it names is fixed or bounded). */
function impliesPartialFilter(shape: QueryShape, partial: Document | undefined): boolean {
  if (!partial) return true;
  return Object.keys(partial).every((field) => shape.equality.includes(field) || shape.range.includes(field));
}

/**
 * Whether one index serves a shape under the prefix rule: its leading keys
 * are equality fields (in any order), then the sort's fields in the index's
 * order with its directions or all of them reversed (equality fields among
 * them are skipped: they are constant), then at most a range field. The scan
 * must be bounded by the index (an equality prefix, or a range on the first
 * key after it); an unfiltered query is served only when the index gives its
 * order. Filter fields the index lacks are checked on the fetched documents.
 * `$in` counts as equality: MongoDB scans each value's range and merges them
 * in order for a sort. Returns how many leading keys bound the scan (0: the
 * index only gives the order), or null when the index does not serve it.
 */
function boundKeys(index: Pick<IndexDescription, 'key' | 'partialFilterExpression'>, shape: QueryShape): number | null {
  if (!impliesPartialFilter(shape, index.partialFilterExpression)) return null;
  const keys = Object.entries(index.key as Record<string, unknown>).map(([field, dir]) => [field, dir === -1 ? -1 : 1] as const);
  const equality = new Set(shape.equality);
  let p = 0;
  while (p < keys.length && equality.has(keys[p]![0])) p++;
  const rest = keys.slice(p).filter(([field]) => !equality.has(field));
  const sort = shape.sort.filter(([field]) => !equality.has(field));
  if (sort.length > rest.length) return null;
  const sameDirection = sort.every(([field, dir], i) => rest[i]![0] === field && rest[i]![1] === dir);
  const reversed = sort.every(([field, dir], i) => rest[i]![0] === field && rest[i]![1] === -dir);
  if (!sameDirection && !reversed) return null;
  const ranged = rest.length > 0 && shape.range.includes(rest[0]![0]) ? 1 : 0;
  if (p + ranged > 0) return p + ranged;
  return shape.equality.length === 0 && shape.range.length === 0 && sort.length > 0 ? 0 : null;
}

/** Every collection has its `_id` index. */
const ID_INDEX = { key: { _id: 1 }, name: '_id_' } as const;

/**
 * The index that serves a shape, or null. A filter fixing `_id` is always
 * served (one document at most); otherwise, of the indexes (the `_id` index
 * and `indexes`) that serve it under the prefix rule, the one whose leading
 * keys bound the most (the first of equals).
 */
export function servingIndex(shape: QueryShape, indexes: readonly IndexDescription[]): string | null {
  if (shape.equality.includes('_id')) return ID_INDEX.name;
  let best: { name: string; bound: number } | null = null;
  for (const index of [ID_INDEX, ...indexes]) {
    const bound = boundKeys(index, shape);
    if (bound !== null && (best === null || bound > best.bound)) best = { name: index.name ?? Object.keys(index.key).join('_'), bound };
  }
  return best?.name ?? null;
}

/** A shape no index serves on purpose, and why. */
export interface AllowedShape {
  shape: string;
  reason: string;
}

/** What recordQueryShapes writes, one JSON object per line, the first time a process sends a shape. */
interface RecordedShape {
  shape: string;
  command: string;
  /** The index that serves it. */
  index: string | null;
  /** Or the reason an index is not worth it (ALLOWED_SHAPES). */
  allowed: string | null;
  /** The first frames of ours that sent it (outside node_modules), as far as the stack reaches. */
  from: string[];
}

/** Frames of our own code in the current stack (the driver's and Node's left out). */
function ourFrames(): string[] {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 60;
  const stack = new Error().stack ?? '';
  Error.stackTraceLimit = limit;
  return stack
    .split('\n')
    .slice(1)
    .map((line) => line.trim().replace(/^at /, ''))
    .filter((line) => !/node_modules|node:|query-shapes\.ts|\(<anonymous>\)$|^async Promise\.|^Error/.test(line))
    .slice(0, 4);
}

/** A frame in a test file: the test reading the store to assert, not the code under test. */
function isTestFrame(frame: string): boolean {
  return /\/test\/|\.test\.ts:|\.fault\.ts:/.test(frame);
}

/** Shapes this process has recorded, over all its clients. */
const seen = new Set<string>();

/**
 * Records every query shape the client sends, once per process, to
 * `<dir>/<pid>.jsonl` (appended as each new shape is first seen, so a killed
 * process keeps what it sent). A shape whose nearest frame of ours is in a
 * test file is the test's own read, not the code's: it is not recorded. Test-only: `createMongo` calls it when
 * MONGO_QUERY_SHAPES_DIR is set, and sets `monitorCommands` only then.
 * `indexesOf` gives the declared indexes of a collection by its name.
 */
export function recordQueryShapes(client: MongoClient, dir: string, indexesOf: (collection: string) => readonly IndexDescription[], allowed: readonly AllowedShape[]): void {
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${process.pid}.jsonl`);
  const reasons = new Map(allowed.map((a) => [a.shape, a.reason]));
  client.on('commandStarted', (e: CommandStartedEvent) => {
    for (const shape of commandShapes(e.commandName, e.command)) {
      const key = describeShape(shape);
      if (seen.has(key)) continue;
      const from = ourFrames();
      // A test's own read through the code's handles is not checked (nor remembered: the code may send the same shape later).
      if (from.length > 0 && isTestFrame(from[0]!)) continue;
      seen.add(key);
      const index = servingIndex(shape, indexesOf(shape.collection));
      const line: RecordedShape = { shape: key, command: e.commandName, index, allowed: index === null ? (reasons.get(key) ?? null) : null, from };
      // Best effort: a shape that cannot be written (its folder removed by another run) must not fail the command.
      try {
        mkdirSync(dir, { recursive: true });
        appendFileSync(file, JSON.stringify(line) + '\n');
      } catch {
        seen.delete(key);
      }
    }
  });
}
