// Mocha `--require` hook: `require('vscode')` and `require('vscode-languageclient/node')` resolve to
// the small fakes next to this file, so the extension's modules load in plain Node without VS Code.
import Module = require('module');
import * as path from 'path';

const redirects: Record<string, string> = {
  vscode: path.join(__dirname, 'vscode.js'),
  'vscode-languageclient/node': path.join(__dirname, 'languageclient.js'),
};

type Resolve = (request: string, ...rest: unknown[]) => string;
const mod = Module as unknown as { _resolveFilename: Resolve };
const original = mod._resolveFilename;
mod._resolveFilename = function (request: string, ...rest: unknown[]): string {
  const target = redirects[request];
  return target ?? original.call(this, request, ...rest);
};
