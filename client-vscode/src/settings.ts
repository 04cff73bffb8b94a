// The `kernelopt.*` settings, read through a minimal getter so tests need no real configuration.
import { DEFAULT_API_KEY_ENV } from './ids';

export type Provider = 'anthropic' | 'vertex' | 'offline';

export interface BeamSettings {
  width: number;
  iterations: number;
  plans: number;
  retries: number;
}

export interface KernelOptSettings {
  interpreter: string;
  dumpFolders: string[];
  provider: Provider;
  model: string;
  apiKeyEnv: string;
  beam: BeamSettings;
  device: string;
  ncuPath: string;
  allowConfigChanges: boolean;
  budget: number;
  userKernels: boolean;
  harnesses: Record<string, string>;
}

/** The part of vscode.WorkspaceConfiguration that reading settings needs. */
export interface ConfigGetter {
  get<T>(key: string): T | undefined;
}

export const DEFAULTS: KernelOptSettings = {
  interpreter: '',
  dumpFolders: [],
  provider: 'offline',
  model: 'claude-sonnet-4-6',
  apiKeyEnv: DEFAULT_API_KEY_ENV,
  beam: { width: 4, iterations: 5, plans: 4, retries: 4 },
  device: 'auto',
  ncuPath: 'ncu',
  allowConfigChanges: false,
  budget: 600,
  userKernels: true,
  harnesses: {},
};

const PROVIDERS: readonly Provider[] = ['anthropic', 'vertex', 'offline'];

function str(cfg: ConfigGetter, key: string, fallback: string): string {
  const v = cfg.get<unknown>(key);
  return typeof v === 'string' ? v.trim() : fallback;
}

function int(cfg: ConfigGetter, key: string, fallback: number, min: number): number {
  const v = cfg.get<unknown>(key);
  return typeof v === 'number' && Number.isInteger(v) && v >= min ? v : fallback;
}

/** A number of seconds, 0 meaning no limit; anything else falls back. */
function seconds(cfg: ConfigGetter, key: string, fallback: number): number {
  const v = cfg.get<unknown>(key);
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : fallback;
}

/** Reads and sanitises the settings: a bad value falls back to its default instead of reaching the server. */
export function readSettings(cfg: ConfigGetter): KernelOptSettings {
  const provider = cfg.get<unknown>('provider');
  const folders = cfg.get<unknown>('dumpFolders');
  return {
    interpreter: str(cfg, 'interpreter', DEFAULTS.interpreter),
    dumpFolders: Array.isArray(folders)
      ? folders.filter((f): f is string => typeof f === 'string' && f.trim() !== '').map((f) => f.trim())
      : [],
    provider: PROVIDERS.includes(provider as Provider) ? (provider as Provider) : DEFAULTS.provider,
    model: str(cfg, 'model', DEFAULTS.model) || DEFAULTS.model,
    apiKeyEnv: str(cfg, 'apiKeyEnv', DEFAULTS.apiKeyEnv) || DEFAULTS.apiKeyEnv,
    beam: {
      width: int(cfg, 'beam.width', DEFAULTS.beam.width, 1),
      iterations: int(cfg, 'beam.iterations', DEFAULTS.beam.iterations, 1),
      plans: int(cfg, 'beam.plans', DEFAULTS.beam.plans, 1),
      retries: int(cfg, 'beam.retries', DEFAULTS.beam.retries, 0),
    },
    device: str(cfg, 'device', DEFAULTS.device) || DEFAULTS.device,
    ncuPath: str(cfg, 'ncuPath', DEFAULTS.ncuPath) || DEFAULTS.ncuPath,
    allowConfigChanges: cfg.get<unknown>('allowConfigChanges') === true,
    budget: seconds(cfg, 'budget', DEFAULTS.budget),
    userKernels: cfg.get<unknown>('userKernels') !== false,
    harnesses: harnessMap(cfg.get<unknown>('harnesses')),
  };
}

/** `kernelopt.harnesses`: file (or file::kernel) -> harness name; anything else is dropped. */
function harnessMap(value: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (value && typeof value === 'object' && !Array.isArray(value)) {
    for (const [key, harness] of Object.entries(value as Record<string, unknown>)) {
      if (typeof harness === 'string' && harness.trim() !== '' && key.trim() !== '') {
        out[key.trim()] = harness.trim();
      }
    }
  }
  return out;
}

/**
 * What goes into `initializationOptions`: the contract's settings object. The `interpreter` the
 * server sees is the user's setting ("" = workers use the server's own Python), not the one we
 * resolved to launch it, and the API key is never part of it.
 */
export function initializationOptions(s: KernelOptSettings): Record<string, unknown> {
  return {
    dumpFolders: s.dumpFolders,
    provider: s.provider,
    model: s.model,
    apiKeyEnv: s.apiKeyEnv,
    beam: { ...s.beam },
    device: s.device,
    ncuPath: s.ncuPath,
    interpreter: s.interpreter,
    allowConfigChanges: s.allowConfigChanges,
    budget: s.budget,
    harnesses: { ...s.harnesses },
  };
}

/** Settings whose change needs a new server process (launch command, environment, document selector). */
export const RESTART_KEYS = ['interpreter', 'apiKeyEnv', 'dumpFolders', 'userKernels'] as const;
