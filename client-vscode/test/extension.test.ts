// activate() against the vscode and LanguageClient fakes: command wiring, server launch, and the
// flows behind each command, down to the workspace/executeCommand requests sent to the server.
import * as assert from 'assert';
import { activate, deactivate } from '../src/extension';
import { ClientCommand, InternalCommand, SECRET_API_KEY } from '../src/ids';
import { flush, lineOf, manifest, OUTPUT_CODE } from './helpers';
import { LanguageClient } from './mock/languageclient';
import { __mock, commands, EventEmitter, makeEditor, TabInputTextDiff, Uri } from './mock/vscode';

const DUMP = Uri.file('/ws/torch_compile_debug/run_1/torchinductor/model__0_inference_0.0/output_code.py');
const RUN_DIR = '/ws/.kernelopt/runs/r42';

function doneStatus(extra: Record<string, unknown> = {}) {
  return {
    jobId: 'j1',
    kind: 'optimize',
    state: 'done',
    kernel: 'triton_poi_fused_add_0',
    uri: DUMP.toString(),
    bestSpeedup: 1.23,
    runId: 'r42',
    originalUri: Uri.file(`${RUN_DIR}/original_kernel.py`).toString(),
    optimizedUri: Uri.file(`${RUN_DIR}/optimized_kernel.py`).toString(),
    ...extra,
  };
}

describe('extension', () => {
  let ctx: any;

  async function start(): Promise<void> {
    ctx = __mock.makeContext();
    await activate(ctx);
    await flush();
  }

  // The server inherits the test process's environment: a key exported in the developer's shell
  // must not decide what the API-key tests see.
  let exportedKey: string | undefined;

  beforeEach(async () => {
    __mock.reset();
    LanguageClient.reset();
    __mock.state.workspaceFolders = [{ uri: Uri.file('/ws'), name: 'ws', index: 0 }];
    exportedKey = process.env.ANTHROPIC_API_KEY;
    delete process.env.ANTHROPIC_API_KEY;
  });

  afterEach(async () => {
    if (exportedKey !== undefined) {
      process.env.ANTHROPIC_API_KEY = exportedKey;
    }
    await deactivate();
    for (const d of ctx?.subscriptions ?? []) {
      await d.dispose();
    }
  });

  const status = () => __mock.state.statusItems[0].text;
  const run = (id: string, ...args: unknown[]) => commands.executeCommand(id, ...args);
  const notify = (params: unknown) => LanguageClient.last.notify('kernelopt/jobStatus', params);

  describe('command wiring', () => {
    beforeEach(start);

    it('registers a handler for every command contributed in package.json', () => {
      const contributed: string[] = manifest().contributes.commands.map((c: { command: string }) => c.command);
      assert.strictEqual(contributed.length, 10);
      for (const id of contributed) {
        assert.ok(__mock.state.commands.has(id), `no handler for ${id}`);
      }
    });

    it('registers none of the server command ids (the LanguageClient does)', () => {
      const registered = [...__mock.state.commands.keys()];
      assert.deepStrictEqual(registered.filter((id) => id.startsWith('kernelopt.server.')), []);
      assert.deepStrictEqual(registered.sort(), [...Object.values(ClientCommand), InternalCommand.jobsMenu].sort());
    });

    it('registers the kernelopt-diff content provider and the status item', () => {
      assert.ok(__mock.state.contentProviders.has('kernelopt-diff'));
      assert.strictEqual(__mock.state.statusItems.length, 1);
      assert.strictEqual(status(), '$(zap) KernelOPT: idle');
    });
  });

  describe('server launch', () => {
    it('starts `python3 -m kernelopt_lsp.main` by default, over stdio', async () => {
      await start();
      const client = LanguageClient.last;
      assert.strictEqual(client.id, 'kernelopt');
      assert.strictEqual(client.serverOptions.command, 'python3');
      assert.deepStrictEqual(client.serverOptions.args, ['-m', 'kernelopt_lsp.main']);
      assert.strictEqual(client.serverOptions.transport, undefined);
      assert.strictEqual(client.serverOptions.options.cwd, '/ws');
      assert.ok(client.running);
      assert.strictEqual(client.clientOptions.outputChannel, __mock.state.outputChannels[0]);
      assert.deepStrictEqual(client.clientOptions.synchronize, { configurationSection: 'kernelopt' });
      assert.strictEqual(client.clientOptions.initializationOptions.provider, 'offline');
    });

    it('uses the Python extension environment when kernelopt.interpreter is empty', async () => {
      __mock.state.extensions.set('ms-python.python', {
        id: 'ms-python.python',
        isActive: true,
        exports: { environments: { getActiveEnvironmentPath: () => ({ id: 'v', path: '/ws/.venv/bin/python' }) } },
        activate: async () => undefined,
      });
      await start();
      assert.strictEqual(LanguageClient.last.serverOptions.command, '/ws/.venv/bin/python');
    });

    it('restarts when the Python extension selects another environment, and only then', async () => {
      let selected = '/ws/.venv/bin/python';
      const changed = new EventEmitter<unknown>();
      __mock.state.extensions.set('ms-python.python', {
        id: 'ms-python.python',
        isActive: true,
        exports: { environments: { getActiveEnvironmentPath: () => ({ path: selected }), onDidChangeActiveEnvironmentPath: changed.event } },
        activate: async () => undefined,
      });
      await start();
      changed.fire({});
      await flush();
      assert.strictEqual(LanguageClient.instances.length, 1, 'same environment: no restart');
      selected = '/ws/.venv2/bin/python';
      changed.fire({});
      await flush();
      assert.strictEqual(LanguageClient.instances.length, 2);
      assert.strictEqual(LanguageClient.last.serverOptions.command, '/ws/.venv2/bin/python');
    });

    it('uses kernelopt.interpreter over the Python extension, and restarts when it changes', async () => {
      __mock.setConfig({ interpreter: '/opt/py/bin/python' });
      __mock.state.extensions.set('ms-python.python', {
        id: 'ms-python.python',
        isActive: true,
        exports: { environments: { getActiveEnvironmentPath: () => ({ path: '/other/python' }) } },
        activate: async () => undefined,
      });
      await start();
      assert.strictEqual(LanguageClient.last.serverOptions.command, '/opt/py/bin/python');
      const first = LanguageClient.last;
      __mock.changeConfig({ interpreter: '/new/python' });
      await flush();
      assert.strictEqual(LanguageClient.instances.length, 2);
      assert.ok(first.disposed, 'the old client is disposed before the new one registers commands');
      assert.strictEqual(LanguageClient.last.serverOptions.command, '/new/python');
    });

    it('does not restart for settings the server reads itself', async () => {
      await start();
      __mock.changeConfig({ model: 'other', 'beam.width': 2 });
      await flush();
      assert.strictEqual(LanguageClient.instances.length, 1);
    });

    it('passes a stored API key in the configured env var', async () => {
      __mock.setConfig({ apiKeyEnv: 'MY_KEY' });
      ctx = __mock.makeContext();
      ctx.secrets.values.set(SECRET_API_KEY, 'sk-stored');
      await activate(ctx);
      await flush();
      assert.strictEqual(LanguageClient.last.serverOptions.options.env.MY_KEY, 'sk-stored');
      assert.ok(!('ANTHROPIC_API_KEY' in LanguageClient.last.serverOptions.options.env));
    });

    it('Set API Key stores the key as a secret, restarts the server with it, and never logs it', async () => {
      await start();
      assert.ok(!('ANTHROPIC_API_KEY' in LanguageClient.last.serverOptions.options.env));
      __mock.answer('sk-ant-typed-secret');
      await run(ClientCommand.setApiKey);
      await flush();
      assert.strictEqual(__mock.state.inputBoxes[0].password, true);
      assert.strictEqual(ctx.secrets.values.get(SECRET_API_KEY), 'sk-ant-typed-secret');
      assert.strictEqual(LanguageClient.instances.length, 2);
      assert.strictEqual(LanguageClient.last.serverOptions.options.env.ANTHROPIC_API_KEY, 'sk-ant-typed-secret');
      const log = __mock.state.outputChannels[0].lines.join('\n');
      assert.ok(!log.includes('sk-ant-typed-secret'));
      assert.ok(!JSON.stringify(LanguageClient.last.clientOptions.initializationOptions).includes('sk-ant'));
      assert.ok(!JSON.stringify(__mock.state.config).includes('sk-ant'));
    });

    it('an empty entry removes a stored key; a dismissed box changes nothing', async () => {
      ctx = __mock.makeContext();
      ctx.secrets.values.set(SECRET_API_KEY, 'old');
      await activate(ctx);
      await flush();
      __mock.answer(undefined);
      await run(ClientCommand.setApiKey);
      assert.strictEqual(ctx.secrets.values.get(SECRET_API_KEY), 'old');
      __mock.answer('');
      await run(ClientCommand.setApiKey);
      await flush();
      assert.strictEqual(ctx.secrets.values.has(SECRET_API_KEY), false);
      assert.ok(!('ANTHROPIC_API_KEY' in LanguageClient.last.serverOptions.options.env));
    });

    it('reports a server that does not start and shows it in the status bar', async () => {
      LanguageClient.startError = new Error('No module named kernelopt_lsp');
      await start();
      assert.strictEqual(status(), '$(error) KernelOPT: stopped');
      const err = __mock.state.messages.find((m) => m.level === 'error');
      assert.ok(err && err.text.includes('pip install -e .'), JSON.stringify(__mock.state.messages));
      await assert.doesNotReject(() => run(ClientCommand.cancelJob, { jobId: 'j' }) as Promise<unknown>);
      assert.ok(__mock.state.messages.some((m) => m.level === 'error' && m.text.includes('not running')));
    });

    it('copies the torch.compile call the server returns for copyConfig to the clipboard, and only then', async () => {
      await start();
      const middleware = LanguageClient.last.clientOptions.middleware.executeCommand;
      const answer = { text: 'compiled = torch.compile(model, mode="max-autotune-no-cudagraphs")\n', title: 'no graphs', verified: true };
      const sent: Array<{ command: string; args: unknown[] }> = [];
      const next = async (command: string, args: unknown[]) => {
        sent.push({ command, args });
        return command === 'kernelopt.server.copyConfig' ? answer : { jobId: 'j9' };
      };
      const result = await middleware('kernelopt.server.copyConfig', [{ uri: DUMP.toString() }], next);
      assert.deepStrictEqual(result, answer);
      assert.deepStrictEqual(sent, [{ command: 'kernelopt.server.copyConfig', args: [{ uri: DUMP.toString() }] }]);
      assert.strictEqual(__mock.state.clipboard, answer.text);
      assert.match(__mock.state.messages.at(-1)?.text ?? '', /copied the torch\.compile call \(no graphs, verified\)/);

      __mock.state.clipboard = '';
      const shown = __mock.state.messages.length;
      assert.deepStrictEqual(await middleware('kernelopt.server.optimize', [{}], next), { jobId: 'j9' });
      assert.strictEqual(__mock.state.clipboard, '');  // other commands pass through untouched
      assert.strictEqual(__mock.state.messages.length, shown);
    });

    it('Restart Server builds a new client', async () => {
      await start();
      await run(ClientCommand.restartServer);
      assert.strictEqual(LanguageClient.instances.length, 2);
      assert.ok(LanguageClient.instances[0].disposed);
      assert.ok(LanguageClient.last.running);
    });
  });

  describe('kernel commands', () => {
    beforeEach(start);

    it('Optimize Kernel sends kernelopt.server.optimize with the kernel under the cursor', async () => {
      LanguageClient.responses['kernelopt.server.optimize'] = { jobId: 'j7' };
      __mock.state.activeTextEditor = makeEditor(DUMP, OUTPUT_CODE, lineOf(OUTPUT_CODE, 'tmp0 = tl.load'));
      const result = await run(ClientCommand.optimizeKernel);
      assert.deepStrictEqual(result, { jobId: 'j7' });
      assert.deepStrictEqual(LanguageClient.last.executed, [
        { command: 'kernelopt.server.optimize', arg: { uri: DUMP.toString(), kernel: 'triton_poi_fused_add_0' } },
      ]);
    });

    it('Profile Kernel takes the kernel named at a .run() call', async () => {
      const line = lineOf(OUTPUT_CODE, 'triton_red_fused_sum_1.run(');
      __mock.state.activeTextEditor = makeEditor(DUMP, OUTPUT_CODE, line, 12);
      await run(ClientCommand.profileKernel);
      assert.deepStrictEqual(LanguageClient.last.executed, [
        { command: 'kernelopt.server.profile', arg: { uri: DUMP.toString(), kernel: 'triton_red_fused_sum_1' } },
      ]);
    });

    it('Verify Edit forwards an explicit {uri, kernel} argument as is', async () => {
      await run(ClientCommand.verifyEdit, { uri: 'file:///x/output_code.py', kernel: 'k' });
      assert.deepStrictEqual(LanguageClient.last.executed, [{ command: 'kernelopt.server.verify', arg: { uri: 'file:///x/output_code.py', kernel: 'k' } }]);
    });

    it('asks which kernel when the cursor is in none of them', async () => {
      __mock.state.activeTextEditor = makeEditor(DUMP, OUTPUT_CODE, 0);
      __mock.answer((items: Array<{ label: string }>) => items[1]);
      await run(ClientCommand.optimizeKernel);
      assert.deepStrictEqual(__mock.state.quickPicks[0].items.map((i: { label: string }) => i.label), ['triton_poi_fused_add_0', 'triton_red_fused_sum_1']);
      assert.strictEqual(LanguageClient.last.executed[0].arg.kernel, 'triton_red_fused_sum_1');
    });

    it('opens a file passed from a menu that is not the active editor', async () => {
      const other = Uri.file('/ws/other/output_code.py');
      __mock.state.files.set(other.toString(), OUTPUT_CODE);
      __mock.answer((items: Array<{ label: string }>) => items[0]);
      await run(ClientCommand.optimizeKernel, other);
      assert.deepStrictEqual(LanguageClient.last.executed[0].arg, { uri: other.toString(), kernel: 'triton_poi_fused_add_0' });
    });

    it('sends nothing without an editor', async () => {
      await run(ClientCommand.optimizeKernel);
      assert.deepStrictEqual(LanguageClient.last.executed, []);
      assert.ok(__mock.state.messages.some((m) => m.level === 'warning'));
    });
  });

  describe('jobs, status and review', () => {
    beforeEach(start);

    it('shows progress from kernelopt/jobStatus in the status bar', async () => {
      notify({ jobId: 'j1', kind: 'optimize', state: 'queued', kernel: 'k' });
      assert.strictEqual(status(), '$(sync~spin) KernelOPT: queued');
      notify({ jobId: 'j1', kind: 'optimize', state: 'running', kernel: 'k', iteration: 3, iterations: 5 });
      assert.strictEqual(status(), '$(sync~spin) KernelOPT: optimizing 3/5');
      notify(doneStatus());
      assert.strictEqual(status(), '$(check) KernelOPT: best 1.23×');
      await flush();
      const done = __mock.state.messages.find((m) => m.text.includes('optimized triton_poi_fused_add_0, best 1.23×'));
      assert.ok(done);
      assert.deepStrictEqual(done.items, ['Show Diff', 'Apply', 'Discard']);
    });

    it('a run that kept the compiler kernel says why and offers no diff to review', async () => {
      const kept = 'kept the compiler kernel: gate 4 not distinguishable from noise';
      notify({ jobId: 'j3', kind: 'optimize', state: 'done', kernel: 'k', runId: 'r7', bestSpeedup: 1.0, message: kept });
      await flush();
      const done = __mock.state.messages.find((m) => m.text.includes('optimize k done'));
      assert.ok(done, JSON.stringify(__mock.state.messages));
      assert.ok(done.text.includes(kept));
      assert.deepStrictEqual(done.items, []);
      assert.strictEqual(status(), '$(zap) KernelOPT: idle');
    });

    it('declares to the server that it shows job status and writes the clipboard (code-server is not named VS Code)', () => {
      const capabilities: any = { experimental: { other: 1 } };
      for (const feature of LanguageClient.last.features) {
        feature.fillClientCapabilities(capabilities);
      }
      assert.deepStrictEqual(capabilities.experimental, { other: 1, kernelopt: { jobStatus: true, clipboard: true } });
    });

    it('reports a failed job once, with a way to the log', async () => {
      notify({ jobId: 'j2', kind: 'profile', state: 'running' });
      notify({ jobId: 'j2', kind: 'profile', state: 'failed', message: 'ncu not found' });
      notify({ jobId: 'j2', kind: 'profile', state: 'failed', message: 'ncu not found' });
      await flush();
      const errors = __mock.state.messages.filter((m) => m.level === 'error');
      assert.strictEqual(errors.length, 1);
      assert.match(errors[0].text, /profile j2 failed: ncu not found/);
      assert.strictEqual(status(), '$(zap) KernelOPT: idle');
    });

    it('Show Diff opens vscode.diff on kernelopt-diff URIs and offers Apply/Discard', async () => {
      notify(doneStatus());
      await flush();
      __mock.answer('Apply');
      await run(ClientCommand.showDiff, { runId: 'r42' });
      await flush();
      const diff = __mock.state.executed.find((e) => e.command === 'vscode.diff');
      assert.ok(diff, 'vscode.diff was not called');
      const [left, right, title] = diff.args as [Uri, Uri, string];
      assert.strictEqual(left.scheme, 'kernelopt-diff');
      assert.strictEqual(left.path, `${RUN_DIR}/original_kernel.py`);
      assert.strictEqual(right.path, `${RUN_DIR}/optimized_kernel.py`);
      assert.match(title, /triton_poi_fused_add_0: original ↔ optimized/);
      const offer = __mock.state.messages[__mock.state.messages.length - 2];
      assert.deepStrictEqual(offer.items, ['Apply', 'Apply to Dump', 'Discard']);
      // Answering Apply applied the run.
      assert.deepStrictEqual(LanguageClient.last.executed, [{ command: 'kernelopt.server.apply', arg: { runId: 'r42' } }]);
    });

    it('Show Diff from the palette can show the whole graph', async () => {
      notify(doneStatus());
      await flush();
      __mock.answer((items: Array<{ scope: string }>) => items.find((i) => i.scope === 'graph'));
      __mock.state.files.set(DUMP.toString(), OUTPUT_CODE);
      const original = OUTPUT_CODE.split("'''\n")[1];
      __mock.state.files.set(doneStatus().originalUri, original);
      __mock.state.files.set(doneStatus().optimizedUri, original.replace('1.0', '2.0'));
      await run(ClientCommand.showDiff);
      const diff = __mock.state.executed.find((e) => e.command === 'vscode.diff');
      assert.ok(diff);
      const right = diff.args[1] as Uri;
      assert.strictEqual(right.path, DUMP.path);
      const text = (await __mock.state.contentProviders.get('kernelopt-diff')!.provideTextDocumentContent(right)) as string;
      assert.ok(text.includes('tmp0 + 2.0'));
    });

    it('Show Diff asks the server where the files of an unknown run are', async () => {
      LanguageClient.responses['kernelopt.server.showDiff'] = {
        diffPath: `${RUN_DIR}/final.diff`,
        originalUri: 'file:///old/original_kernel.py',
        optimizedUri: 'file:///old/optimized_kernel.py',
      };
      await run(ClientCommand.showDiff, { runId: 'old' });
      assert.deepStrictEqual(LanguageClient.last.executed, [{ command: 'kernelopt.server.showDiff', arg: { runId: 'old' } }]);
      const diff = __mock.state.executed.find((e) => e.command === 'vscode.diff');
      assert.ok(diff);
      assert.strictEqual((diff.args[0] as Uri).path, '/old/original_kernel.py');
    });

    it('Apply from the diff editor title applies the run shown and closes its tabs', async () => {
      notify(doneStatus());
      await flush();
      await run(ClientCommand.showDiff, { runId: 'r42' });
      const diff = __mock.state.executed.find((e) => e.command === 'vscode.diff');
      assert.ok(diff);
      const [left, right] = diff.args as [Uri, Uri];
      __mock.state.tabs.push({ input: new TabInputTextDiff(left, right), label: 'diff' }, { input: {}, label: 'other' });
      await run(ClientCommand.applyResult, right);
      assert.deepStrictEqual(LanguageClient.last.executed, [{ command: 'kernelopt.server.apply', arg: { runId: 'r42' } }]);
      assert.deepStrictEqual(__mock.state.tabs.map((t) => t.label), ['other']);
      assert.strictEqual(status(), '$(zap) KernelOPT: idle');
    });

    it('Apply to Dump asks the server for an undoable edit', async () => {
      await run(ClientCommand.applyResult, { runId: 'r1', mode: 'edit' });
      assert.deepStrictEqual(LanguageClient.last.executed, [{ command: 'kernelopt.server.apply', arg: { runId: 'r1', mode: 'edit' } }]);
    });

    it('Apply without a result says so and sends nothing', async () => {
      await run(ClientCommand.applyResult);
      assert.deepStrictEqual(LanguageClient.last.executed, []);
      assert.ok(__mock.state.messages.some((m) => m.text.includes('no optimization result to apply')));
    });

    it('Discard drops the result without touching the server', async () => {
      notify(doneStatus());
      await flush();
      __mock.state.activeTextEditor = { document: { uri: Uri.file('/elsewhere.py') } };
      await run(ClientCommand.discardResult);
      assert.deepStrictEqual(LanguageClient.last.executed, []);
      assert.strictEqual(status(), '$(zap) KernelOPT: idle');
    });

    it('Cancel Job cancels the only job, or asks which one', async () => {
      notify({ jobId: 'a', kind: 'optimize', state: 'running' });
      await run(ClientCommand.cancelJob);
      notify({ jobId: 'b', kind: 'profile', state: 'running' });
      __mock.answer((items: Array<{ label: string }>) => items.find((i) => i.label === 'All jobs'));
      await run(ClientCommand.cancelJob);
      assert.deepStrictEqual(LanguageClient.last.executed, [
        { command: 'kernelopt.server.cancel', arg: { jobId: 'a' } },
        { command: 'kernelopt.server.cancel', arg: {} },
      ]);
    });

    it('clicking the status item offers to cancel a running job', async () => {
      notify({ jobId: 'a', kind: 'optimize', state: 'running', iteration: 2, iterations: 5 });
      __mock.answer((items: Array<{ action: { type: string } }>) => items.find((i) => i.action.type === 'cancel'));
      await run(__mock.state.statusItems[0].command as string);
      assert.deepStrictEqual(LanguageClient.last.executed, [{ command: 'kernelopt.server.cancel', arg: { jobId: 'a' } }]);
    });

    it('a server restart clears its running jobs from the status bar', async () => {
      notify({ jobId: 'a', kind: 'optimize', state: 'running' });
      await run(ClientCommand.restartServer);
      assert.strictEqual(status(), '$(zap) KernelOPT: idle');
    });

    it('Show Output reveals the log channel', async () => {
      await run(ClientCommand.showOutput);
      assert.strictEqual(__mock.state.outputChannels[0].shown, 1);
    });
  });
});
