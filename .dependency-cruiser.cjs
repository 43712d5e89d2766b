/**
 * The layers of the production code, enforced by `npm run lint` (depcruise): shared/src imports neither
 * api/ nor delivery/; delivery/ never imports api/ (and api/ never delivery/):
 * the two processes share only shared/; no import cycles anywhere in the code.
 */
module.exports = {
  forbidden: [
    { name: 'no-circular', severity: 'error', comment: 'an import cycle: move the shared part into a module both can import', from: { path: '^(api|delivery|shared)/src' }, to: { circular: true } },
    { name: 'shared-is-shared', severity: 'error', comment: 'shared/ holds only what both processes import; it imports neither', from: { path: '^shared/src/' }, to: { path: '^(api|delivery)/' } },
    { name: 'delivery-not-api', severity: 'error', comment: 'the delivery process shares only shared/ with the API', from: { path: '^delivery/src/' }, to: { path: '^api/' } },
    { name: 'api-not-delivery', severity: 'error', comment: 'the API process shares only shared/ with delivery', from: { path: '^api/src/' }, to: { path: '^delivery/' } },
    { name: 'not-to-tests', severity: 'error', comment: 'production code never imports test code', from: { path: '^(api|delivery|shared)/src', pathNot: '\\.test\\.ts$' }, to: { path: '(^(api|delivery|shared)/test/|\\.test\\.ts$)' } },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsConfig: { fileName: 'tsconfig.json' },
    tsPreCompilationDeps: true,
    enhancedResolveOptions: { extensions: ['.ts', '.js', '.mjs'] },
  },
};
