/**
 * A slow-operation log for the MongoDB client (MONGO_SLOW_MS): every command
 * that takes at least that long is logged with its name, collection and the
 * shape of its filter (field names and operators, never values), which is
 * what one needs to see which query a server answers without an index.
 */
import type { CommandStartedEvent, CommandSucceededEvent, CommandFailedEvent, Document, MongoClient } from 'mongodb';
import type { Logger } from '../log.js';

/** Field names and operators of a filter, values replaced by "?". */
export function filterShape(value: unknown, depth = 0): unknown {
  if (depth > 4) return '…';
  if (Array.isArray(value)) return value.length > 0 ? [filterShape(value[0], depth + 1)] : [];
  if (value && typeof value === 'object' && !(value instanceof Date) && value.constructor === Object) {
    return Object.fromEntries(Object.entries(value as Record<string, unknown>).map(([k, v]) => [k, filterShape(v, depth + 1)]));
  }
  return '?';
}

/** The filter a command carries, wherever its kind keeps it. */
function filterOf(command: Document): unknown {
  if (command.filter !== undefined) return command.filter;
  if (command.query !== undefined) return command.query; // findAndModify, count
  const first = (command.updates ?? command.deletes)?.[0] as Document | undefined;
  return first?.q;
}

export function watchSlowCommands(client: MongoClient, log: Logger, slowMs: number): void {
  const started = new Map<number, { name: string; collection: unknown; filter: unknown }>();
  client.on('commandStarted', (e: CommandStartedEvent) => {
    const collection = e.command[e.commandName];
    started.set(e.requestId, { name: e.commandName, collection: typeof collection === 'string' ? collection : undefined, filter: filterShape(filterOf(e.command)) });
  });
  const finish = (e: CommandSucceededEvent | CommandFailedEvent): void => {
    const op = started.get(e.requestId);
    started.delete(e.requestId);
    if (op && e.duration >= slowMs) log.warn({ ...op, duration_ms: Math.round(e.duration), failed: 'failure' in e || undefined }, 'slow MongoDB command');
  };
  client.on('commandSucceeded', finish);
  client.on('commandFailed', finish);
}
