import { ref } from './components.js';
import type { SchemaObject } from './components.js';

const deliveryHeader = (description: string, pattern?: string): SchemaObject => ({ required: true, description, schema: pattern ? { type: 'string', pattern } : { type: 'string' } });

/** What the delivery process sends to a subscription's URL (OpenAPI 3.1 `webhooks`). */
export function outgoingWebhooks(): Record<string, SchemaObject> {
  return {
    event: {
      post: {
        operationId: 'receiveEvent',
        tags: ['webhooks'],
        summary: 'An event delivered to your endpoint',
        description:
          'A signed HTTPS POST per (event, subscription). Verify `X-Service-Signature` (HMAC-SHA256 of the raw body keyed with the whole `whsec_` secret) with a constant-time comparison, or the Standard Webhooks headers. Answer 2xx within 4 s. Anything else (another status, a redirect, a timeout) is retried on a backoff schedule with the same delivery id; duplicates are possible, so deduplicate by `X-Service-Delivery` or the event id.',
        parameters: [
          { name: 'X-Service-Signature', in: 'header', ...deliveryHeader('`sha256=` + hex HMAC-SHA256 of the raw body, keyed with the `whsec_` secret', '^sha256=[0-9a-f]{64}$') },
          { name: 'X-Service-Event', in: 'header', ...deliveryHeader('The event type') },
          { name: 'X-Service-Delivery', in: 'header', ...deliveryHeader('The delivery id, the same on every retry') },
          { name: 'webhook-id', in: 'header', ...deliveryHeader('Standard Webhooks: the delivery id') },
          { name: 'webhook-timestamp', in: 'header', ...deliveryHeader('Standard Webhooks: unix seconds of this attempt', '^[0-9]+$') },
          { name: 'webhook-signature', in: 'header', ...deliveryHeader('Standard Webhooks: `v1,` + base64 HMAC-SHA256 of `id.timestamp.body`, keyed with the base64-decoded secret after `whsec_`', '^v1,') },
        ],
        requestBody: { required: true, content: { 'application/json': { schema: ref('EventRecord') } } },
        responses: { '2XX': { description: 'Received; not retried' }, default: { description: 'Any other answer (or none within 4 s) is a failed attempt, retried later' } },
      },
    },
  };
}
