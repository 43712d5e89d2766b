import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'clients/*/dist/**', 'node_modules/**', 'coverage/**', 'bench/**', 'test-artifacts/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { ...globals.node } },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-restricted-properties': ['error', { object: 'process', property: 'env', message: 'Read configuration through the config module.' }],
    },
  },
  {
    files: ['api/src/features/dashboard/static/**/*.js'],
    languageOptions: { globals: { ...globals.browser } },
  },
  {
    files: ['**/*.cjs'],
    languageOptions: { sourceType: 'commonjs' },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    files: ['**/main.ts', 'scripts/**', '**/test/**', '**/*.test.ts', 'eslint.config.js'],
    rules: { 'no-restricted-properties': 'off', '@typescript-eslint/no-explicit-any': 'off' },
  },
);
