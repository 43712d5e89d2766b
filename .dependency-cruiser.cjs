/**
 * The layers of the production code, enforced by `npm run lint` (depcruise): shared/src imports neither
 * api/ nor delivery/; delivery/ never imports api/ (and api/ never delivery/):
 * the two processes share only shared/; no import cycles anywhere in the code; in api/, the event store
 * (api/src/event-store) and the live runtime (api/src/live) sit below the features and import none; a feature
 * (api/src/features/X) imports another feature only through that feature's public index.ts.
 */
module.exports = {
  forbidden: [
    { name: 'no-circular', severity: 'error', comment: 'an import cycle: move the shared part into a module both can import', from: { path: '^(api|delivery|shared)/src' }, to: { circular: true } },
    { name: 'shared-is-shared', severity: 'error', comment: 'shared/ holds only what both processes import; it imports neither', from: { path: '^shared/src/' }, to: { path: '^(api|delivery)/' } },
    { name: 'delivery-not-api', severity: 'error', comment: 'the delivery process shares only shared/ with the API', from: { path: '^delivery/src/' }, to: { path: '^api/' } },
    { name: 'api-not-delivery', severity: 'error', comment: 'the API process shares only shared/ with delivery', from: { path: '^api/src/' }, to: { path: '^delivery/' } },
    { name: 'live-below-features', severity: 'error', comment: 'the live runtime (fan-out, tail window, waiters, feed) and the event store serve the features; they import none', from: { path: '^api/src/(live|event-store)/' }, to: { path: '^api/src/(features|middleware)/' } },
    { name: 'store-below-live', severity: 'error', comment: 'the event store (materializer, reads, watermarks) does not know the live runtime', from: { path: '^api/src/event-store/' }, to: { path: '^api/src/live/' } },
    { name: 'feature-through-index', severity: 'error', comment: 'a feature uses another feature only through its public index.ts (what it exports is what others may use)', from: { path: '^api/src/features/([^/]+)/', pathNot: '\\.test\\.ts$' }, to: { path: '^api/src/features/[^/]+/', pathNot: ['^api/src/features/$1/', '^api/src/features/[^/]+/index\\.ts$'] } },
    { name: 'not-to-tests', severity: 'error', comment: 'production code never imports test code', from: { path: '^(api|delivery|shared)/src', pathNot: '\\.test\\.ts$' }, to: { path: '(^(api|delivery|shared)/test/|\\.test\\.ts$)' } },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsConfig: { fileName: 'tsconfig.json' },
    tsPreCompilationDeps: true,
    enhancedResolveOptions: { extensions: ['.ts', '.js', '.mjs'] },
  },
};
