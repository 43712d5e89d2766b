import { component, DateTime, type Static, Type } from '../../shapes.js';

/** What the user object shows of a key: never the key, never its hash. */
export const KeySummarySchema = component(
  'KeySummary',
  Type.Object({
    preview: Type.String({ description: '`svc_…` and the last 8 characters of the key', examples: ['svc_…Xy12AbCd'] }),
    created_at: DateTime('When the key was created or last rotated'),
  }),
);

export const NewApiKeySchema = component(
  'NewApiKey',
  Type.Object({
    api_key: Type.String({ pattern: '^svc_[A-Za-z0-9_-]{43}$', description: 'The raw key. Shown only in this response; only its SHA-256 is stored.' }),
    preview: Type.String(),
    created_at: DateTime('When the key was created'),
  }),
);
export type NewApiKey = Static<typeof NewApiKeySchema>;
