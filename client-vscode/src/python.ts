// The interpreter selected in the Python extension (ms-python.python), read defensively: the
// extension may be missing, slow to activate, or expose an older API shape.
import * as vscode from 'vscode';

export const PYTHON_EXTENSION_ID = 'ms-python.python';
const ACTIVATE_TIMEOUT_MS = 10_000;

interface EnvironmentPath {
  id?: string;
  path?: string;
}
interface ResolvedEnvironment {
  executable?: { uri?: { fsPath?: string } };
}
/** The subset of the Python extension's `environments` API used here. */
interface PythonEnvironmentsApi {
  getActiveEnvironmentPath?(resource?: vscode.Uri): EnvironmentPath | undefined;
  resolveEnvironment?(env: EnvironmentPath | string): Promise<ResolvedEnvironment | undefined>;
  onDidChangeActiveEnvironmentPath?: vscode.Event<unknown>;
}

function withTimeout<T>(p: Thenable<T>, ms: number): Promise<T | undefined> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(undefined), ms);
    p.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      () => {
        clearTimeout(timer);
        resolve(undefined);
      },
    );
  });
}

async function environmentsApi(): Promise<PythonEnvironmentsApi | undefined> {
  const ext = vscode.extensions.getExtension<unknown>(PYTHON_EXTENSION_ID);
  if (!ext) {
    return undefined;
  }
  const api = ext.isActive ? ext.exports : await withTimeout(ext.activate(), ACTIVATE_TIMEOUT_MS);
  const envs = (api as { environments?: unknown } | undefined)?.environments;
  return envs && typeof envs === 'object' ? (envs as PythonEnvironmentsApi) : undefined;
}

/** The active interpreter's executable, or undefined when it cannot be determined. */
export async function activePythonInterpreter(resource?: vscode.Uri): Promise<string | undefined> {
  try {
    const envs = await environmentsApi();
    const active = envs?.getActiveEnvironmentPath?.(resource);
    if (!active?.path) {
      return undefined;
    }
    // `path` can be an environment folder (e.g. conda); the resolved executable is exact when available.
    const resolved = envs?.resolveEnvironment ? await withTimeout(envs.resolveEnvironment(active), ACTIVATE_TIMEOUT_MS) : undefined;
    return resolved?.executable?.uri?.fsPath || active.path;
  } catch {
    return undefined;
  }
}

/** Subscribes to interpreter changes in the Python extension; a no-op without it. */
export async function onPythonInterpreterChanged(listener: () => void): Promise<vscode.Disposable | undefined> {
  try {
    const envs = await environmentsApi();
    return envs?.onDidChangeActiveEnvironmentPath?.(() => listener());
  } catch {
    return undefined;
  }
}
