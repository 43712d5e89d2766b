import type { ApiConfig } from '../../../config.js';
import { errors, json, PUBLIC, ref } from '../components.js';
import type { SchemaObject } from '../convert.js';

const page = (operationId: string, summary: string, type: string): SchemaObject => ({
  get: { operationId, tags: ['dashboard'], summary, security: PUBLIC, responses: { '200': { description: summary, content: { [type]: { schema: { type: 'string' } } } } } },
});

/** Health, metrics, this document and the dashboard's files. */
export function opsPaths(config: ApiConfig): Record<string, SchemaObject> {
  return {
    '/healthz': {
      get: { operationId: 'healthz', tags: ['operations'], summary: 'Liveness: the process is up', security: PUBLIC, responses: { '200': json('Up', ref('Health')) } },
    },
    '/readyz': {
      get: {
        operationId: 'readyz',
        tags: ['operations'],
        summary: 'Readiness: MongoDB and Kafka answer within 2 s',
        description: 'A 503 lists each failed check in `details` (`mongo`, `kafka`, `process` while shutting down).',
        security: PUBLIC,
        responses: { '200': json('Ready', ref('Ready')), ...errors(503) },
      },
    },
    '/metrics': {
      get: {
        operationId: 'metrics',
        tags: ['operations'],
        summary: 'Prometheus metrics of this API process',
        description: 'Text exposition format 0.0.4. Open when METRICS_TOKEN is not set; otherwise `Authorization: Bearer <METRICS_TOKEN>`. Each process reports its own: scrape every pod.',
        security: config.metrics.token === null ? [{}, { metricsToken: [] }] : [{ metricsToken: [] }],
        responses: { '200': { description: 'The metrics', content: { 'text/plain; version=0.0.4': { schema: { type: 'string' } } } }, ...errors(401) },
      },
    },
    '/api/openapi.json': {
      get: { operationId: 'openapi', tags: ['operations'], summary: 'This document', security: PUBLIC, responses: { '200': { description: 'OpenAPI 3.1', content: { 'application/json': { schema: { type: 'object' } } } } } },
    },
    '/dashboard': page('dashboard', 'The dashboard page (sign up or log in, API key, webhooks, live feed)', 'text/html'),
    '/dashboard/': { get: { operationId: 'dashboardSlash', tags: ['dashboard'], summary: 'Redirects to /dashboard', security: PUBLIC, responses: { '302': { description: 'To /dashboard' } } } },
    '/dashboard/app.js': page('dashboardScript', 'The dashboard\'s script', 'text/javascript'),
    '/dashboard/app.css': page('dashboardStyles', 'The dashboard\'s styles', 'text/css'),
  };
}
