// Every identifier shared with package.json or the server lives here, so tests can compare them.
// See docs/lsp-contract.md in the repository.

/** Commands the client registers itself (contributed in package.json). */
export const ClientCommand = {
  optimizeKernel: 'kernelopt.optimizeKernel',
  profileKernel: 'kernelopt.profileKernel',
  verifyEdit: 'kernelopt.verifyEdit',
  showDiff: 'kernelopt.showDiff',
  applyResult: 'kernelopt.applyResult',
  discardResult: 'kernelopt.discardResult',
  cancelJob: 'kernelopt.cancelJob',
  restartServer: 'kernelopt.restartServer',
  showOutput: 'kernelopt.showOutput',
  setApiKey: 'kernelopt.setApiKey',
} as const;
export type ClientCommandId = (typeof ClientCommand)[keyof typeof ClientCommand];

/** Registered by the client but not contributed: the target of the status bar item. */
export const InternalCommand = {
  jobsMenu: 'kernelopt.jobsMenu',
} as const;

/**
 * Commands the server announces in its executeCommandProvider. The LanguageClient registers these
 * in VS Code on its own; registering them here too would fail with "command already exists".
 */
export const ServerCommand = {
  optimize: 'kernelopt.server.optimize',
  profile: 'kernelopt.server.profile',
  verify: 'kernelopt.server.verify',
  showDiff: 'kernelopt.server.showDiff',
  apply: 'kernelopt.server.apply',
  cancel: 'kernelopt.server.cancel',
  removeAccepted: 'kernelopt.server.removeAccepted',
  /** Returns `{text, title, verified}`: the torch.compile call of a graph's configuration change. */
  copyConfig: 'kernelopt.server.copyConfig',
} as const;
export type ServerCommandId = (typeof ServerCommand)[keyof typeof ServerCommand];
export const SERVER_COMMAND_PREFIX = 'kernelopt.server.';

export const JOB_STATUS_NOTIFICATION = 'kernelopt/jobStatus';
export const DIFF_SCHEME = 'kernelopt-diff';
export const CONFIG_SECTION = 'kernelopt';
export const CLIENT_ID = 'kernelopt';
export const CLIENT_NAME = 'KernelOPT';
export const SECRET_API_KEY = 'kernelopt.apiKey';
export const DEFAULT_API_KEY_ENV = 'ANTHROPIC_API_KEY';
export const SERVER_MODULE = 'kernelopt_lsp.main';
