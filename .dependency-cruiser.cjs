/**
 * The layers of the production code, enforced by `npm run lint` (depcruise): shared/src imports neither
 * api/ nor delivery/; delivery/ never imports api/ (and api/ never delivery/):
 * the two processes share only shared/; no import cycles anywhere in the code; in api/, the event store
 * (api/src/event-store) and the live runtime (api/src/live) sit below the features and import none; a feature
 * (api/src/features/X) imports another feature only through that feature's public index.ts, and so does
 * every other module of api/src (middleware, live runtime, deps.ts, ...), with one composition-root exception:
 * app.ts mounts each feature's router from its routes.ts. A cycle closed only by a type-only import (every
 * service's `import type { ApiDeps }`) is no cycle: the import is erased, nothing loads it at run time.
 * Tests (api/test/, *.test.ts) may import a feature's internals: they test those units directly.
 * shared/ is imported as #shared/* and #test-support/* (package.json "imports"); depcruise resolves them to
 * the files under shared/, so every rule applies to them as to a relative path.
 */
module.exports = {
  forbidden: [
    { name: 'no-circular', severity: 'error', comment: 'an import cycle: move the shared part into a module both can import (a type-only import closes none: it is erased)', from: { path: '^(api|delivery|shared)/src' }, to: { circular: true, viaOnly: { dependencyTypesNot: ['type-only'] } } },
    { name: 'shared-is-shared', severity: 'error', comment: 'shared/ holds only what both processes import; it imports neither', from: { path: '^shared/src/' }, to: { path: '^(api|delivery)/' } },
    { name: 'delivery-not-api', severity: 'error', comment: 'the delivery process shares only shared/ with the API', from: { path: '^delivery/src/' }, to: { path: '^api/' } },
    { name: 'api-not-delivery', severity: 'error', comment: 'the API process shares only shared/ with delivery', from: { path: '^api/src/' }, to: { path: '^delivery/' } },
    { name: 'live-below-features', severity: 'error', comment: 'the live runtime (fan-out, tail window, waiters, feed, held readers) and the event store serve the features; they import none', from: { path: '^api/src/(live|event-store)/' }, to: { path: '^api/src/(features|middleware)/' } },
    { name: 'store-below-live', severity: 'error', comment: 'the event store (materializer, reads, watermarks) does not know the live runtime', from: { path: '^api/src/event-store/' }, to: { path: '^api/src/live/' } },
    { name: 'feature-through-index', severity: 'error', comment: 'a feature uses another feature only through its public index.ts (what it exports is what others may use)', from: { path: '^api/src/features/([^/]+)/', pathNot: '\\.test\\.ts$' }, to: { path: '^api/src/features/[^/]+/', pathNot: ['^api/src/features/$1/', '^api/src/features/[^/]+/index\\.ts$'] } },
    { name: 'outside-through-index', severity: 'error', comment: 'code outside a feature (middleware, live, event store, shapes, deps.ts, ...) uses a feature only through its public index.ts', from: { path: '^api/src/', pathNot: ['^api/src/features/', '^api/src/app\\.ts$', '\\.test\\.ts$'] }, to: { path: '^api/src/features/[^/]+/', pathNot: '^api/src/features/[^/]+/index\\.ts$' } },
    { name: 'app-mounts-routes', severity: 'error', comment: 'the composition root app.ts uses a feature through its index.ts and mounts its router from routes.ts (an index that re-exported its routes would close a cycle: every routes.ts imports deps.ts, and the account guard imports auth and keys)', from: { path: '^api/src/app\\.ts$' }, to: { path: '^api/src/features/[^/]+/', pathNot: '^api/src/features/[^/]+/(index|routes)\\.ts$' } },
    { name: 'imports-resolve', severity: 'error', comment: 'a subpath import (#shared/*, #test-support/*) resolves through package.json "imports" to a file; one that does not would escape every rule above', from: {}, to: { couldNotResolve: true, path: '^#' } },
    { name: 'not-to-tests', severity: 'error', comment: 'production code never imports test code', from: { path: '^(api|delivery|shared)/src', pathNot: '\\.test\\.ts$' }, to: { path: '(^(api|delivery|shared)/test/|\\.test\\.ts$)' } },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsConfig: { fileName: 'tsconfig.json' },
    tsPreCompilationDeps: true,
    enhancedResolveOptions: { extensions: ['.ts', '.js', '.mjs'] },
  },
};
