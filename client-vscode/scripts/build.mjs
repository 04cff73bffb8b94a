// Bundles the extension into dist/extension.js so the .vsix needs no node_modules.
import { build } from 'esbuild';

const production = process.argv.includes('--production');

await build({
  entryPoints: ['src/extension.ts'],
  outfile: 'dist/extension.js',
  bundle: true,
  platform: 'node',
  format: 'cjs',
  target: 'node20',
  // `vscode` is provided by the editor at run time.
  external: ['vscode'],
  minify: production,
  sourcemap: !production,
  // vscode-languageclient ships both `main` and `module`; prefer the CommonJS build.
  mainFields: ['main', 'module'],
  logLevel: 'info',
});
