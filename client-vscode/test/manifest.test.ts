// package.json is what VS Code reads; these checks keep it in line with the code and the contract.
import * as assert from 'assert';
import { ClientCommand, ServerCommand } from '../src/ids';
import { DEFAULTS } from '../src/settings';
import { manifest } from './helpers';

describe('package.json', () => {
  const pkg = manifest();
  const contributed: string[] = pkg.contributes.commands.map((c: { command: string }) => c.command);

  it('contributes exactly the client commands of the contract', () => {
    assert.deepStrictEqual([...contributed].sort(), Object.values(ClientCommand).sort());
    for (const c of pkg.contributes.commands) {
      assert.strictEqual(c.category, 'KernelOPT', c.command);
    }
  });

  it('never mentions a kernelopt.server.* command (the server owns them)', () => {
    const text = JSON.stringify(pkg.contributes) + JSON.stringify(pkg.activationEvents);
    assert.ok(!text.includes('kernelopt.server.'));
    for (const id of Object.values(ServerCommand)) {
      assert.ok(id.startsWith('kernelopt.server.'));
      assert.ok(!contributed.includes(id));
    }
  });

  it('menus only reference contributed commands', () => {
    for (const [menu, entries] of Object.entries(pkg.contributes.menus) as Array<[string, Array<{ command: string }>]>) {
      for (const e of entries) {
        assert.ok(contributed.includes(e.command), `${menu}: ${e.command}`);
      }
    }
  });

  it('puts kernel commands on dump files and Apply/Discard on diffs', () => {
    const title = pkg.contributes.menus['editor/title'] as Array<{ command: string; when: string }>;
    const optimize = title.find((e) => e.command === ClientCommand.optimizeKernel);
    assert.ok(optimize?.when.includes('resourceFilename == output_code.py'));
    assert.ok(optimize?.when.includes('resourcePath =~ /torch_compile_debug/'));
    for (const id of [ClientCommand.applyResult, ClientCommand.discardResult]) {
      assert.strictEqual(title.find((e) => e.command === id)?.when, 'resourceScheme == kernelopt-diff');
    }
    const context = pkg.contributes.menus['editor/context'] as Array<{ command: string }>;
    for (const id of [ClientCommand.optimizeKernel, ClientCommand.profileKernel, ClientCommand.verifyEdit]) {
      assert.ok(context.some((e) => e.command === id), id);
    }
  });

  it('activates on Inductor dumps in the workspace', () => {
    assert.ok(pkg.activationEvents.includes('workspaceContains:**/output_code.py'));
    assert.ok(pkg.activationEvents.includes('workspaceContains:**/torch_compile_debug/**'));
    assert.strictEqual(pkg.main, './dist/extension.js');
  });

  it('declares every kernelopt.* setting with the contract defaults', () => {
    const props = pkg.contributes.configuration.properties;
    const expected: Record<string, unknown> = {
      'kernelopt.interpreter': DEFAULTS.interpreter,
      'kernelopt.dumpFolders': DEFAULTS.dumpFolders,
      'kernelopt.provider': DEFAULTS.provider,
      'kernelopt.model': DEFAULTS.model,
      'kernelopt.apiKeyEnv': DEFAULTS.apiKeyEnv,
      'kernelopt.beam.width': DEFAULTS.beam.width,
      'kernelopt.beam.iterations': DEFAULTS.beam.iterations,
      'kernelopt.beam.plans': DEFAULTS.beam.plans,
      'kernelopt.beam.retries': DEFAULTS.beam.retries,
      'kernelopt.device': DEFAULTS.device,
      'kernelopt.ncuPath': DEFAULTS.ncuPath,
      'kernelopt.allowConfigChanges': DEFAULTS.allowConfigChanges,
      'kernelopt.budget': DEFAULTS.budget,
      'kernelopt.userKernels': DEFAULTS.userKernels,
      'kernelopt.harnesses': DEFAULTS.harnesses,
      'kernelopt.trace.server': 'off',
    };
    assert.deepStrictEqual(Object.keys(props).sort(), Object.keys(expected).sort());
    for (const [key, value] of Object.entries(expected)) {
      assert.deepStrictEqual(props[key].default, value, key);
    }
    assert.deepStrictEqual(props['kernelopt.provider'].enum, ['anthropic', 'vertex', 'offline']);
    assert.deepStrictEqual(props['kernelopt.trace.server'].enum, ['off', 'messages', 'verbose']);
  });

  it('can be packaged: publisher, license, engine no older than the typings', () => {
    assert.ok(pkg.publisher);
    assert.strictEqual(pkg.license, 'Apache-2.0');
    const engine = /^\^?(\d+)\.(\d+)/.exec(pkg.engines.vscode);
    const types = /^\^?(\d+)\.(\d+)/.exec(pkg.devDependencies['@types/vscode']);
    assert.ok(engine && types);
    assert.ok(Number(engine[1]) * 1000 + Number(engine[2]) >= Number(types[1]) * 1000 + Number(types[2]));
    assert.match(pkg.scripts.package, /vsce package --no-dependencies/);
  });
});
