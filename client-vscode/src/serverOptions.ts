// How kernelopt-lsp is launched: interpreter, arguments and environment. Pure, so it is unit-tested.
import { DEFAULT_API_KEY_ENV, SERVER_MODULE } from './ids';
import { KernelOptSettings } from './settings';

export const FALLBACK_INTERPRETER = 'python3';

export type InterpreterSource = 'setting' | 'python-extension' | 'default';

export interface ResolvedInterpreter {
  path: string;
  source: InterpreterSource;
}

/**
 * The explicit setting wins; then the environment selected in the Python extension; then
 * `python3`, which is the name that exists on every Linux/macOS machine with Python 3.
 */
export function resolveInterpreter(setting: string, pythonExtensionPath: string | undefined): ResolvedInterpreter {
  const configured = setting.trim();
  if (configured) {
    return { path: configured, source: 'setting' };
  }
  const fromExtension = pythonExtensionPath?.trim();
  if (fromExtension) {
    return { path: fromExtension, source: 'python-extension' };
  }
  return { path: FALLBACK_INTERPRETER, source: 'default' };
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** A setting like "MY KEY" or "A=B" would corrupt the environment; such names fall back to the default. */
export function apiKeyEnvName(setting: string): string {
  const name = setting.trim();
  return ENV_NAME.test(name) ? name : DEFAULT_API_KEY_ENV;
}

/** Structurally a vscode-languageclient `Executable` (stdio transport is the default). */
export interface ServerExecutable {
  command: string;
  args: string[];
  options: { env: Record<string, string>; cwd?: string };
}

/**
 * The server process description. `env` is the whole environment: the LanguageClient spawns a
 * `command` server with exactly `options.env` (it merges the editor's environment only for `module`
 * servers), so it starts from the editor's own (`baseEnv`). Without it the server ran with no PATH,
 * HOME or CUDA variables, and a key exported in the user's shell never reached it.
 */
export function buildServerExecutable(
  settings: Pick<KernelOptSettings, 'interpreter' | 'apiKeyEnv'>,
  pythonExtensionPath: string | undefined,
  apiKey: string | undefined,
  cwd?: string,
  baseEnv: Readonly<Record<string, string | undefined>> = process.env,
): ServerExecutable {
  const interpreter = resolveInterpreter(settings.interpreter, pythonExtensionPath);
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(baseEnv)) {
    if (value !== undefined) {
      env[name] = value;
    }
  }
  // Unbuffered so the server's stderr log reaches the output channel as it is written.
  env.PYTHONUNBUFFERED = '1';
  if (apiKey) {
    env[apiKeyEnvName(settings.apiKeyEnv)] = apiKey;
  }
  const exe: ServerExecutable = { command: interpreter.path, args: ['-m', SERVER_MODULE], options: { env } };
  if (cwd) {
    exe.options.cwd = cwd;
  }
  return exe;
}

/** One log line describing the launch; it names the key's variable but never contains the key. */
export function describeLaunch(exe: ServerExecutable, source: InterpreterSource, apiKeyEnv: string): string {
  const keyName = apiKeyEnvName(apiKeyEnv);
  const key = keyName in exe.options.env ? `API key from secret storage in $${keyName}` : `no stored API key ($${keyName} inherited if set)`;
  return `Starting ${[exe.command, ...exe.args].join(' ')} (interpreter from ${source}; ${key})`;
}

/**
 * Documents the server gets: Inductor dumps, debug trees, the kernel cache and any extra dump folders;
 * with `userKernels`, every Python file too (the server serves those that hold `@triton.jit` kernels).
 */
export function documentSelector(dumpFolders: readonly string[], userKernels = false): Array<{ scheme: string; language: string; pattern: string }> {
  const patterns = userKernels ? ['**/*.py'] : ['**/output_code.py', '**/torch_compile_debug/**/*.py', '**/torchinductor_*/**/*.py'];
  for (const folder of dumpFolders) {
    // Glob patterns use forward slashes on every platform.
    patterns.push(`${folder.replace(/\\/g, '/').replace(/\/+$/, '')}/**/*.py`);
  }
  return patterns.map((pattern) => ({ scheme: 'file', language: 'python', pattern }));
}
