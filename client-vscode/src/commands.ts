// The client's own commands. Each finds what it acts on (kernel under the cursor, run shown in the
// diff, job in the status menu) and forwards to a `kernelopt.server.*` command, which the
// LanguageClient registered; those ids are never registered here.
import * as vscode from 'vscode';
import { closeDiffTabs, DiffContentProvider, DiffScope, openDiff, runIdOf } from './diff';
import { ClientCommand, ClientCommandId, InternalCommand, ServerCommand, ServerCommandId } from './ids';
import { JobStatus, JobTracker } from './jobs';
import { findKernelAt, listKernels } from './kernels';
import { ApiKeyStore, promptForApiKey } from './secrets';
import { apiKeyEnvName } from './serverOptions';
import { formatSpeedup, jobsMenuItems, JobsMenuItem } from './status';

export interface CommandDeps {
  server: { executeCommand(command: ServerCommandId, arg: object): Promise<unknown>; restart(): Promise<void> };
  tracker: JobTracker;
  diffs: DiffContentProvider;
  output: { show(preserveFocus?: boolean): void; info(message: string): void };
  apiKeys: ApiKeyStore;
  apiKeyEnv(): string;
}

export interface KernelTarget {
  uri: string;
  kernel: string;
}

export type ApplyMode = 'store' | 'edit';

type Handler = (...args: unknown[]) => Promise<unknown>;

function isRecord(x: unknown): x is Record<string, unknown> {
  return typeof x === 'object' && x !== null && !(x instanceof vscode.Uri);
}

export function isKernelTarget(x: unknown): x is KernelTarget {
  return isRecord(x) && typeof x.uri === 'string' && typeof x.kernel === 'string' && x.kernel !== '';
}

/** A run id from a command argument: `{runId}`, or a `kernelopt-diff:` URI (editor/title menus pass one). */
export function runIdFromArg(arg: unknown): string | undefined {
  if (arg instanceof vscode.Uri) {
    return runIdOf(arg);
  }
  return isRecord(arg) && typeof arg.runId === 'string' && arg.runId !== '' ? arg.runId : undefined;
}

/** Label for a run in messages and pickers: "triton_poi_fused_add_0 (best 1.23×)". */
export function runLabel(job: JobStatus): string {
  const best = job.bestSpeedup !== undefined ? ` (best ${formatSpeedup(job.bestSpeedup)})` : '';
  return `${job.kernel ?? job.runId ?? job.jobId}${best}`;
}

async function pickKernel(doc: vscode.TextDocument, purpose: string): Promise<string | undefined> {
  const kernels = listKernels(doc.getText());
  if (kernels.length === 0) {
    void vscode.window.showWarningMessage('KernelOPT: no Triton kernel found in this file.');
    return undefined;
  }
  if (kernels.length === 1) {
    return kernels[0].name;
  }
  const picked = await vscode.window.showQuickPick(
    kernels.map((k) => ({ label: k.name, description: `line ${k.start + 1}` })),
    { placeHolder: `Kernel to ${purpose}` },
  );
  return picked?.label;
}

/** The kernel a command acts on: its argument, else the one under the cursor, else a pick from the file. */
export async function resolveKernelTarget(arg: unknown, purpose: string): Promise<KernelTarget | undefined> {
  if (isKernelTarget(arg)) {
    return { uri: arg.uri, kernel: arg.kernel };
  }
  const editor = vscode.window.activeTextEditor;
  if (arg instanceof vscode.Uri && editor?.document.uri.toString() !== arg.toString()) {
    // Invoked from a menu on a file that is not the active editor: no cursor to go by.
    const doc = await vscode.workspace.openTextDocument(arg);
    const kernel = await pickKernel(doc, purpose);
    return kernel ? { uri: doc.uri.toString(), kernel } : undefined;
  }
  if (!editor) {
    void vscode.window.showWarningMessage('KernelOPT: open an Inductor dump (output_code.py) first.');
    return undefined;
  }
  const doc = editor.document;
  const pos = editor.selection.active;
  const range = doc.getWordRangeAtPosition(pos);
  const kernel = findKernelAt(doc.getText(), pos.line, range ? doc.getText(range) : undefined) ?? (await pickKernel(doc, purpose));
  return kernel ? { uri: doc.uri.toString(), kernel } : undefined;
}

/** The run a command acts on: argument, active diff, the only pending result, or a pick. */
export async function resolveRun(arg: unknown, tracker: JobTracker, purpose: string): Promise<JobStatus | undefined> {
  const runId = runIdFromArg(arg) ?? runIdOf(vscode.window.activeTextEditor?.document.uri);
  if (runId) {
    // A run from before a restart is unknown to the tracker; the id alone still works for the server.
    return tracker.findRun(runId) ?? { jobId: runId, kind: 'optimize', state: 'done', runId };
  }
  const pending = tracker.pendingResults();
  if (pending.length === 0) {
    void vscode.window.showInformationMessage(`KernelOPT: no optimization result to ${purpose}.`);
    return undefined;
  }
  if (pending.length === 1) {
    return pending[0];
  }
  const picked = await vscode.window.showQuickPick(
    pending.map((job) => ({ label: runLabel(job), description: `run ${job.runId}`, job })),
    { placeHolder: `Result to ${purpose}` },
  );
  return picked?.job;
}

export function createHandlers(deps: CommandDeps): Record<ClientCommandId, Handler> & Record<string, Handler> {
  const { server, tracker } = deps;

  const startJob = async (command: ServerCommandId, purpose: string, arg: unknown): Promise<unknown> => {
    const target = await resolveKernelTarget(arg, purpose);
    if (!target) {
      return undefined;
    }
    const result = await server.executeCommand(command, target);
    const jobId = isRecord(result) ? result.jobId : undefined;
    deps.output.info(`${purpose} ${target.kernel}: ${typeof jobId === 'string' ? `job ${jobId}` : 'requested'}`);
    return result;
  };

  const apply = async (arg: unknown): Promise<unknown> => {
    const job = await resolveRun(arg, tracker, 'apply');
    if (!job?.runId) {
      return undefined;
    }
    const mode = isRecord(arg) && (arg.mode === 'edit' || arg.mode === 'store') ? (arg.mode as ApplyMode) : undefined;
    // The contract's default mode is `store`; only pass `mode` when asked for, as `{runId}` otherwise.
    const result = await server.executeCommand(ServerCommand.apply, mode ? { runId: job.runId, mode } : { runId: job.runId });
    tracker.resolveRun(job.runId);
    await closeDiffTabs(job.runId);
    void vscode.window.showInformationMessage(
      mode === 'edit'
        ? `KernelOPT: ${runLabel(job)} written into the dump; Undo (Ctrl+Z) in the dump reverts it.`
        : `KernelOPT: accepted ${runLabel(job)} (recorded in .kernelopt/accepted/).`,
    );
    return result;
  };

  const discard = async (arg: unknown): Promise<void> => {
    const job = await resolveRun(arg, tracker, 'discard');
    if (!job?.runId) {
      return;
    }
    // Nothing to tell the server: a run only changes anything once applied. Its files stay on disk.
    tracker.resolveRun(job.runId);
    await closeDiffTabs(job.runId);
    void vscode.window.showInformationMessage(`KernelOPT: discarded ${runLabel(job)}.`);
  };

  /** Shown next to an open diff: the decision the diff is for. */
  const offerDecision = async (job: JobStatus): Promise<void> => {
    const choice = await vscode.window.showInformationMessage(
      `KernelOPT: ${runLabel(job)}. Apply the optimized kernel?`,
      'Apply',
      'Apply to Dump',
      'Discard',
    );
    if (choice === 'Apply') {
      await apply({ runId: job.runId });
    } else if (choice === 'Apply to Dump') {
      await apply({ runId: job.runId, mode: 'edit' });
    } else if (choice === 'Discard') {
      await discard({ runId: job.runId });
    }
  };

  const showDiff = async (arg: unknown): Promise<void> => {
    let scope: DiffScope | undefined = isRecord(arg) && (arg.scope === 'graph' || arg.scope === 'kernel') ? arg.scope : undefined;
    let job: JobStatus | undefined;
    if (runIdFromArg(arg) !== undefined) {
      job = await resolveRun(arg, tracker, 'review');
    } else {
      const picked = await pickDiff(tracker.pendingResults());
      job = picked?.job;
      scope = picked?.scope;
    }
    if (!job?.runId) {
      return;
    }
    if (!job.originalUri || !job.optimizedUri) {
      // Not in this session's notifications: the server knows where the run's files are.
      const info = await server.executeCommand(ServerCommand.showDiff, { runId: job.runId });
      if (isRecord(info) && typeof info.originalUri === 'string' && typeof info.optimizedUri === 'string') {
        job = { ...job, originalUri: info.originalUri, optimizedUri: info.optimizedUri };
      } else {
        return;
      }
    }
    if (await openDiff(job, scope ?? 'kernel', deps.diffs)) {
      void offerDecision(job);
    }
  };

  const cancel = async (arg: unknown): Promise<unknown> => {
    if (isRecord(arg) && typeof arg.jobId === 'string') {
      return server.executeCommand(ServerCommand.cancel, { jobId: arg.jobId });
    }
    const active = tracker.active();
    if (active.length === 0) {
      void vscode.window.showInformationMessage('KernelOPT: no running job.');
      return undefined;
    }
    if (active.length === 1) {
      return server.executeCommand(ServerCommand.cancel, { jobId: active[0].jobId });
    }
    const items = [
      ...active.map((j) => ({ label: `${j.kind} ${j.kernel ?? j.jobId}`, description: j.message, jobId: j.jobId as string | undefined })),
      { label: 'All jobs', description: `${active.length} running`, jobId: undefined },
    ];
    const picked = await vscode.window.showQuickPick(items, { placeHolder: 'Job to cancel' });
    if (!picked) {
      return undefined;
    }
    return server.executeCommand(ServerCommand.cancel, picked.jobId ? { jobId: picked.jobId } : {});
  };

  const jobsMenu = async (): Promise<void> => {
    const items: Array<JobsMenuItem & vscode.QuickPickItem> = jobsMenuItems(tracker.active(), tracker.pendingResults());
    const picked = await vscode.window.showQuickPick(items, { placeHolder: 'KernelOPT jobs' });
    if (!picked) {
      return;
    }
    const action = picked.action;
    if (action.type === 'cancel') {
      await server.executeCommand(ServerCommand.cancel, action.jobId ? { jobId: action.jobId } : {});
    } else if (action.type === 'showDiff') {
      await showDiff({ runId: action.runId });
    } else {
      deps.output.show(true);
    }
  };

  return {
    [ClientCommand.optimizeKernel]: (arg) => startJob(ServerCommand.optimize, 'optimize', arg),
    [ClientCommand.profileKernel]: (arg) => startJob(ServerCommand.profile, 'profile', arg),
    [ClientCommand.verifyEdit]: (arg) => startJob(ServerCommand.verify, 'verify', arg),
    [ClientCommand.showDiff]: showDiff,
    [ClientCommand.applyResult]: apply,
    [ClientCommand.discardResult]: discard,
    [ClientCommand.cancelJob]: cancel,
    [ClientCommand.restartServer]: async () => {
      await server.restart();
    },
    [ClientCommand.showOutput]: async () => deps.output.show(true),
    [ClientCommand.setApiKey]: () => promptForApiKey(deps.apiKeys, apiKeyEnvName(deps.apiKeyEnv())),
    [InternalCommand.jobsMenu]: jobsMenu,
  };
}

/** Picks a pending result and whether to see just the kernel or the whole dump. */
async function pickDiff(pending: readonly JobStatus[]): Promise<{ job: JobStatus; scope: DiffScope } | undefined> {
  if (pending.length === 0) {
    void vscode.window.showInformationMessage('KernelOPT: no optimization result to review.');
    return undefined;
  }
  const items = pending.flatMap((job) => {
    const kernel = { label: `$(diff) ${runLabel(job)}`, description: 'kernel: original ↔ optimized', job, scope: 'kernel' as DiffScope };
    if (!job.uri) {
      return [kernel];
    }
    return [kernel, { label: `$(file-code) ${runLabel(job)}`, description: 'whole graph: the dump with the optimized kernel', job, scope: 'graph' as DiffScope }];
  });
  if (items.length === 1) {
    return items[0];
  }
  return vscode.window.showQuickPick(items, { placeHolder: 'Result to review' });
}

/** Registers every client command; errors become one message instead of an unhandled rejection. */
export function registerCommands(deps: CommandDeps): vscode.Disposable[] {
  const handlers = createHandlers(deps);
  return Object.entries(handlers).map(([id, handler]) =>
    vscode.commands.registerCommand(id, async (...args: unknown[]) => {
      try {
        return await handler(...args);
      } catch (e) {
        void vscode.window.showErrorMessage(`KernelOPT: ${(e as Error)?.message ?? String(e)}`);
        return undefined;
      }
    }),
  );
}
