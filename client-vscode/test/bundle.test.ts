// The esbuild bundle (what the .vsix ships) loads and exports the extension entry points. It runs
// the real vscode-languageclient code at load time, so the fake `vscode` is widened for it: any
// API the mock lacks becomes a permissive stub (classes to extend, enums to read).
import * as assert from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import './mock/vscode';

const bundle = path.join(__dirname, '..', '..', 'dist', 'extension.js');

function stub(name: string): any {
  const fn = function () {} as any;
  return new Proxy(fn, {
    get: (target, prop) => (prop === 'prototype' ? target.prototype : prop in target ? target[prop] : stub(`${name}.${String(prop)}`)),
    construct: () => ({}),
    apply: () => undefined,
  });
}

describe('bundle', () => {
  (fs.existsSync(bundle) ? it : it.skip)('dist/extension.js loads and exports activate/deactivate', () => {
    const mockPath = require.resolve('vscode');
    const entry = require.cache[mockPath];
    assert.ok(entry, 'the vscode mock is loaded');
    const real = entry.exports;
    entry.exports = new Proxy(real, { get: (t, p) => (p in t ? t[p] : stub(String(p))) });
    try {
      delete require.cache[bundle];
      const ext = require(bundle);
      assert.strictEqual(typeof ext.activate, 'function');
      assert.strictEqual(typeof ext.deactivate, 'function');
    } finally {
      entry.exports = real;
      delete require.cache[bundle];
    }
  });
});
