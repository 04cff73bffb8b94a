import * as assert from 'assert';
import {
  apiKeyEnvName,
  buildServerExecutable,
  describeLaunch,
  documentSelector,
  FALLBACK_INTERPRETER,
  resolveInterpreter,
} from '../src/serverOptions';
import { DEFAULTS, initializationOptions, readSettings } from '../src/settings';

function getter(values: Record<string, unknown>) {
  return { get: <T>(key: string) => values[key] as T | undefined };
}

describe('settings → server options', () => {
  describe('resolveInterpreter', () => {
    it('prefers the kernelopt.interpreter setting over the Python extension', () => {
      assert.deepStrictEqual(resolveInterpreter('/opt/venv/bin/python', '/usr/bin/python3.12'), {
        path: '/opt/venv/bin/python',
        source: 'setting',
      });
    });

    it('uses the Python extension environment when the setting is empty', () => {
      assert.deepStrictEqual(resolveInterpreter('', '/home/me/.venv/bin/python'), {
        path: '/home/me/.venv/bin/python',
        source: 'python-extension',
      });
    });

    it('treats a whitespace-only setting as empty', () => {
      assert.strictEqual(resolveInterpreter('   ', '/venv/bin/python').source, 'python-extension');
    });

    it('falls back to python3 without setting or Python extension', () => {
      assert.deepStrictEqual(resolveInterpreter('', undefined), { path: 'python3', source: 'default' });
      assert.deepStrictEqual(resolveInterpreter('', ' '), { path: FALLBACK_INTERPRETER, source: 'default' });
    });
  });

  describe('buildServerExecutable', () => {
    it('launches `<interpreter> -m kernelopt_lsp.main`', () => {
      const exe = buildServerExecutable({ interpreter: '', apiKeyEnv: 'ANTHROPIC_API_KEY' }, undefined, undefined);
      assert.strictEqual(exe.command, 'python3');
      assert.deepStrictEqual(exe.args, ['-m', 'kernelopt_lsp.main']);
    });

    it('puts the stored secret in the default env var', () => {
      const exe = buildServerExecutable({ interpreter: '/py', apiKeyEnv: 'ANTHROPIC_API_KEY' }, undefined, 'sk-secret');
      assert.strictEqual(exe.command, '/py');
      assert.strictEqual(exe.options.env.ANTHROPIC_API_KEY, 'sk-secret');
    });

    it('uses the env var named by kernelopt.apiKeyEnv', () => {
      const exe = buildServerExecutable({ interpreter: '', apiKeyEnv: 'MY_CLAUDE_KEY' }, '/venv/python', 'k1');
      assert.strictEqual(exe.options.env.MY_CLAUDE_KEY, 'k1');
      assert.ok(!('ANTHROPIC_API_KEY' in exe.options.env));
      assert.strictEqual(exe.command, '/venv/python');
    });

    it('passes the editor environment on, so an inherited key, PATH and CUDA variables reach the server', () => {
      // The LanguageClient spawns a command server with exactly options.env: anything missing here is gone.
      const base = { PATH: '/usr/bin', HOME: '/home/me', CUDA_VISIBLE_DEVICES: '1', ANTHROPIC_API_KEY: 'inherited', UNSET: undefined };
      const exe = buildServerExecutable({ interpreter: '', apiKeyEnv: 'ANTHROPIC_API_KEY' }, undefined, undefined, undefined, base);
      assert.deepStrictEqual(exe.options.env, {
        PATH: '/usr/bin', HOME: '/home/me', CUDA_VISIBLE_DEVICES: '1', ANTHROPIC_API_KEY: 'inherited', PYTHONUNBUFFERED: '1',
      });
      const stored = buildServerExecutable({ interpreter: '', apiKeyEnv: 'ANTHROPIC_API_KEY' }, undefined, 'sk-stored', undefined, base);
      assert.strictEqual(stored.options.env.ANTHROPIC_API_KEY, 'sk-stored', 'a stored key wins over an inherited one');
      assert.strictEqual(base.ANTHROPIC_API_KEY, 'inherited', 'the base environment is not changed');
    });

    it("defaults to the extension host's own environment", () => {
      const exe = buildServerExecutable({ interpreter: '', apiKeyEnv: 'K' }, undefined, undefined);
      assert.strictEqual(exe.options.env.PATH, process.env.PATH);
    });

    it('sets cwd only when given', () => {
      assert.strictEqual(buildServerExecutable({ interpreter: '', apiKeyEnv: 'X' }, undefined, undefined).options.cwd, undefined);
      assert.strictEqual(buildServerExecutable({ interpreter: '', apiKeyEnv: 'X' }, undefined, undefined, '/ws').options.cwd, '/ws');
    });
  });

  describe('apiKeyEnvName', () => {
    it('keeps valid names and rejects ones that would corrupt the environment', () => {
      assert.strictEqual(apiKeyEnvName('MY_KEY_2'), 'MY_KEY_2');
      assert.strictEqual(apiKeyEnvName(' MY_KEY '), 'MY_KEY');
      for (const bad of ['', 'A=B', 'MY KEY', '1ABC', 'A-B']) {
        assert.strictEqual(apiKeyEnvName(bad), 'ANTHROPIC_API_KEY', bad);
      }
    });
  });

  describe('describeLaunch', () => {
    it('names the variable but never contains the key', () => {
      const exe = buildServerExecutable({ interpreter: '', apiKeyEnv: 'ANTHROPIC_API_KEY' }, undefined, 'sk-ant-very-secret');
      const line = describeLaunch(exe, 'default', 'ANTHROPIC_API_KEY');
      assert.ok(line.includes('python3 -m kernelopt_lsp.main'), line);
      assert.ok(line.includes('$ANTHROPIC_API_KEY'), line);
      assert.ok(!line.includes('sk-ant-very-secret'), line);
    });

    it('says when no key is stored', () => {
      const exe = buildServerExecutable({ interpreter: '', apiKeyEnv: 'K' }, undefined, undefined);
      assert.match(describeLaunch(exe, 'default', 'K'), /no stored API key/);
    });
  });

  describe('documentSelector', () => {
    it('covers dumps, debug trees and extra dump folders', () => {
      const patterns = documentSelector(['/data/dumps/', 'C:\\dumps']).map((f) => f.pattern);
      assert.ok(patterns.includes('**/output_code.py'));
      assert.ok(patterns.includes('**/torch_compile_debug/**/*.py'));
      assert.ok(patterns.includes('/data/dumps/**/*.py'));
      assert.ok(patterns.includes('C:/dumps/**/*.py'));
      assert.ok(documentSelector([]).every((f) => f.scheme === 'file' && f.language === 'python'));
    });

    it('takes every Python file when the project\'s own kernels are served', () => {
      assert.deepStrictEqual(documentSelector([], true).map((f) => f.pattern), ['**/*.py']);
      assert.ok(!documentSelector([], false).map((f) => f.pattern).includes('**/*.py'));
    });
  });

  describe('readSettings', () => {
    it('returns the contract defaults for an empty configuration', () => {
      assert.deepStrictEqual(readSettings(getter({})), DEFAULTS);
      assert.strictEqual(DEFAULTS.provider, 'offline');
      assert.strictEqual(DEFAULTS.model, 'claude-sonnet-4-6');
      assert.deepStrictEqual(DEFAULTS.beam, { width: 4, iterations: 5, plans: 4, retries: 4 });
    });

    it('reads values and replaces invalid ones with defaults', () => {
      const s = readSettings(
        getter({
          interpreter: ' /py ',
          provider: 'anthropic',
          'beam.width': 8,
          'beam.iterations': 0,
          'beam.retries': 0,
          'beam.plans': 2.5,
          dumpFolders: ['/a', '', 3, ' /b '],
          apiKeyEnv: '',
          device: 'cuda:1',
        }),
      );
      assert.strictEqual(s.interpreter, '/py');
      assert.strictEqual(s.provider, 'anthropic');
      assert.deepStrictEqual(s.beam, { width: 8, iterations: 5, plans: 4, retries: 0 });
      assert.deepStrictEqual(s.dumpFolders, ['/a', '/b']);
      assert.strictEqual(s.apiKeyEnv, 'ANTHROPIC_API_KEY');
      assert.strictEqual(s.device, 'cuda:1');
      assert.strictEqual(readSettings(getter({ provider: 'openai' })).provider, 'offline');
      assert.strictEqual(readSettings(getter({ budget: 180 })).budget, 180);
      assert.strictEqual(readSettings(getter({ budget: 0 })).budget, 0); // no limit
      assert.strictEqual(readSettings(getter({ budget: -5 })).budget, 600);
    });

    it('initializationOptions carry the contract keys and nothing secret', () => {
      const init = initializationOptions(readSettings(getter({ model: 'm' })));
      assert.deepStrictEqual(Object.keys(init).sort(), [
        'allowConfigChanges',
        'apiKeyEnv',
        'beam',
        'budget',
        'device',
        'dumpFolders',
        'harnesses',
        'interpreter',
        'model',
        'ncuPath',
        'provider',
      ]);
      assert.strictEqual(init.model, 'm');
    });
  });
});
