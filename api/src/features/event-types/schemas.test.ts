import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsImport from 'ajv-formats';
import { expect } from 'chai';
import { EVENT_TYPES, isOperationalEventType } from '#shared/eventlog/types.js';
import { parseIngestBody } from '../ingest/schemas.js';
import { EVENT_TYPE_LIST, EVENT_TYPE_LIST_ETAG, EVENT_TYPE_LIST_JSON } from './schemas.js';

// ajv-formats is CommonJS with a default export; under NodeNext it arrives wrapped (as in api/src/validation.ts).
type AddFormats = (ajv: Ajv2020) => Ajv2020;
const addFormats: AddFormats = (addFormatsImport as unknown as { default?: AddFormats }).default ?? (addFormatsImport as unknown as AddFormats);

describe('event-type catalog', () => {
  // With the formats the schemas use (date-time): a code generator or validator reading the catalog knows them.
  const ajv = addFormats(new Ajv2020({ strict: true, allErrors: true }));

  it('lists every event type once, in the order of the contract, each described', () => {
    expect(EVENT_TYPE_LIST.event_types.map((t) => t.type)).to.deep.equal([...EVENT_TYPES]);
    for (const t of EVENT_TYPE_LIST.event_types) expect(t.description.length, t.type).to.be.above(10);
  });

  it('gives each type a strict JSON Schema 2020-12 for its data that takes its example and unknown fields, {} for a producer\'s type, and refuses a mistyped known field', () => {
    for (const { type, data_schema: schema } of EVENT_TYPE_LIST.event_types) {
      expect(schema.$schema, type).to.equal('https://json-schema.org/draft/2020-12/schema');
      const validate = ajv.compile(schema);
      const [example] = schema.examples as Record<string, unknown>[];
      expect(validate(example), `${type} example: ${JSON.stringify(validate.errors)}`).to.equal(true);
      // A producer's type requires nothing; the service's own types (webhook.disabled, ...) always carry their fields.
      expect(validate({}), `${type} requires nothing`).to.equal(!isOperationalEventType(type));
      expect(validate({ ...example, added_later: { any: 'thing' } }), `${type} allows other fields`).to.equal(true);
      const [field] = Object.keys(schema.properties as object);
      expect(validate({ [field!]: { not: 'a scalar' } }), `${type}.${field} is typed`).to.equal(false);
      expect(validate([]), `${type} data is an object`).to.equal(false);
    }
  });

  it('is not enforced at ingest: data the catalog would refuse is accepted as sent', () => {
    const data = { call_id: 42, direction: ['in'], extra: true };
    expect(ajv.compile(EVENT_TYPE_LIST.event_types[0]!.data_schema)(data)).to.equal(false);
    const [event] = parseIngestBody({ account_id: 'usr_1', type: 'call.started', data }, { maxBatch: 1, maxDataBytes: 1000 });
    expect(event!.data).to.deep.equal(data);
  });

  it('has an entity tag derived from its bytes', () => {
    expect(JSON.parse(EVENT_TYPE_LIST_JSON)).to.deep.equal(EVENT_TYPE_LIST);
    expect(EVENT_TYPE_LIST_ETAG).to.match(/^"[A-Za-z0-9_-]{27}"$/);
  });
});
