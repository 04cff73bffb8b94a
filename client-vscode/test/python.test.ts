import * as assert from 'assert';
import { activePythonInterpreter, PYTHON_EXTENSION_ID } from '../src/python';
import { __mock, EventEmitter, Uri } from './mock/vscode';

function installPython(environments: unknown, isActive = true) {
  let activated = 0;
  __mock.state.extensions.set(PYTHON_EXTENSION_ID, {
    id: PYTHON_EXTENSION_ID,
    isActive,
    exports: isActive ? { environments } : undefined,
    activate: async () => {
      activated++;
      return { environments };
    },
  });
  return () => activated;
}

describe('Python extension interpreter', () => {
  beforeEach(() => __mock.reset());

  it('is undefined without the Python extension', async () => {
    assert.strictEqual(await activePythonInterpreter(), undefined);
  });

  it('reads getActiveEnvironmentPath', async () => {
    installPython({ getActiveEnvironmentPath: () => ({ id: 'x', path: '/venv/bin/python' }) });
    assert.strictEqual(await activePythonInterpreter(), '/venv/bin/python');
  });

  it('prefers the resolved executable (path may be an environment folder)', async () => {
    installPython({
      getActiveEnvironmentPath: () => ({ id: 'conda', path: '/opt/conda/envs/t' }),
      resolveEnvironment: async () => ({ executable: { uri: Uri.file('/opt/conda/envs/t/bin/python') } }),
      onDidChangeActiveEnvironmentPath: new EventEmitter().event,
    });
    assert.strictEqual(await activePythonInterpreter(), '/opt/conda/envs/t/bin/python');
  });

  it('activates an inactive Python extension first', async () => {
    const activations = installPython({ getActiveEnvironmentPath: () => ({ path: '/p' }) }, false);
    assert.strictEqual(await activePythonInterpreter(), '/p');
    assert.strictEqual(activations(), 1);
  });

  it('survives an API that throws or has another shape', async () => {
    installPython({
      getActiveEnvironmentPath: () => {
        throw new Error('boom');
      },
    });
    assert.strictEqual(await activePythonInterpreter(), undefined);
    installPython('not an object');
    assert.strictEqual(await activePythonInterpreter(), undefined);
    installPython({ getActiveEnvironmentPath: () => ({ id: 'x' }) });
    assert.strictEqual(await activePythonInterpreter(), undefined);
  });
});
