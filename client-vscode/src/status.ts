// The status bar item: formatting is pure (tested); the item itself is a thin binding.
import * as vscode from 'vscode';
import { InternalCommand } from './ids';
import { JobStatus, JobTracker } from './jobs';

export type ServerState = 'starting' | 'running' | 'stopped' | 'failed';

export interface StatusView {
  text: string;
  tooltip: string;
  /** Draws attention (warning background) when the server is down. */
  warning: boolean;
}

/** 1.2345 → "1.23×". */
export function formatSpeedup(x: number): string {
  return `${x.toFixed(2)}×`;
}

const VERB: Record<JobStatus['kind'], string> = { optimize: 'optimizing', profile: 'profiling', verify: 'verifying' };

/** Short state of one active job: "queued", "optimizing 3/5", "optimizing 3/5 · best 1.23×", "profiling". */
export function formatJob(job: JobStatus): string {
  if (job.state === 'queued') {
    return 'queued';
  }
  let text = VERB[job.kind];
  if (job.iteration !== undefined && job.iterations !== undefined && job.iterations > 0) {
    text += ` ${job.iteration}/${job.iterations}`;
  }
  if (job.kind === 'optimize' && job.bestSpeedup !== undefined && job.bestSpeedup > 0) {
    text += ` · best ${formatSpeedup(job.bestSpeedup)}`;
  }
  return text;
}

function describe(job: JobStatus): string {
  const parts = [`${job.kind} ${job.kernel ?? job.jobId}: ${job.state}`];
  if (job.message) {
    parts.push(job.message);
  }
  return parts.join(' — ');
}

/**
 * What the item shows. Priority: server down > running jobs > an unreviewed result > idle,
 * so the most actionable thing is always visible.
 */
export function formatStatus(server: ServerState, active: readonly JobStatus[], pending: readonly JobStatus[]): StatusView {
  const hint = 'Click for jobs and results';
  if (server === 'failed' || server === 'stopped') {
    return {
      text: '$(error) KernelOPT: stopped',
      tooltip: `The KernelOPT server is not running. ${server === 'failed' ? 'It failed to start; see KernelOPT: Show Output.' : ''}`.trim(),
      warning: true,
    };
  }
  if (active.length > 0) {
    // The newest job is the one the user most likely just started.
    const main = active[active.length - 1];
    const more = active.length > 1 ? ` (+${active.length - 1})` : '';
    return {
      text: `$(sync~spin) KernelOPT: ${formatJob(main)}${more}`,
      tooltip: [...active.map(describe), hint].join('\n'),
      warning: false,
    };
  }
  if (pending.length > 0) {
    const best = pending[0];
    const text = best.bestSpeedup !== undefined ? `best ${formatSpeedup(best.bestSpeedup)}` : 'result ready';
    return {
      text: `$(check) KernelOPT: ${text}`,
      tooltip: [...pending.map(describe), 'Click to review, apply or discard'].join('\n'),
      warning: false,
    };
  }
  if (server === 'starting') {
    return { text: '$(loading~spin) KernelOPT: starting', tooltip: 'Starting kernelopt-lsp', warning: false };
  }
  return { text: '$(zap) KernelOPT: idle', tooltip: `No running jobs. ${hint}`, warning: false };
}

export type JobsMenuAction =
  | { type: 'cancel'; jobId?: string }
  | { type: 'showDiff'; runId: string }
  | { type: 'showOutput' };

export interface JobsMenuItem {
  label: string;
  description?: string;
  detail?: string;
  action: JobsMenuAction;
}

/** The quick pick behind the status item: progress of running jobs (pick one to cancel it), results to review. */
export function jobsMenuItems(active: readonly JobStatus[], pending: readonly JobStatus[]): JobsMenuItem[] {
  const items: JobsMenuItem[] = [];
  for (const job of [...active].reverse()) {
    const item: JobsMenuItem = {
      label: `$(debug-stop) Cancel ${job.kind} ${job.kernel ?? job.jobId}`,
      description: formatJob(job),
      action: { type: 'cancel', jobId: job.jobId },
    };
    if (job.message) {
      item.detail = job.message;
    }
    items.push(item);
  }
  if (active.length > 1) {
    items.push({ label: '$(debug-stop) Cancel all jobs', action: { type: 'cancel' } });
  }
  for (const job of pending) {
    items.push({
      label: `$(diff) Review ${job.kernel ?? job.runId}`,
      description: job.bestSpeedup !== undefined ? `best ${formatSpeedup(job.bestSpeedup)}` : 'result ready',
      detail: `run ${job.runId}`,
      action: { type: 'showDiff', runId: job.runId as string },
    });
  }
  items.push({ label: '$(output) Show Output', action: { type: 'showOutput' } });
  return items;
}

/** Binds the formatted state to a StatusBarItem; re-renders on every tracker or server change. */
export class StatusBar implements vscode.Disposable {
  private readonly item: vscode.StatusBarItem;
  private server: ServerState = 'starting';
  private readonly sub: { dispose(): void };

  constructor(private readonly tracker: JobTracker) {
    this.item = vscode.window.createStatusBarItem('kernelopt.status', vscode.StatusBarAlignment.Left, 50);
    this.item.name = 'KernelOPT';
    this.item.command = InternalCommand.jobsMenu;
    this.sub = tracker.onDidChange(() => this.render());
    this.render();
    this.item.show();
  }

  setServerState(state: ServerState): void {
    this.server = state;
    this.render();
  }

  /** Exposed for tests and logs. */
  get text(): string {
    return this.item.text;
  }

  private render(): void {
    const view = formatStatus(this.server, this.tracker.active(), this.tracker.pendingResults());
    this.item.text = view.text;
    this.item.tooltip = view.tooltip;
    this.item.backgroundColor = view.warning ? new vscode.ThemeColor('statusBarItem.warningBackground') : undefined;
  }

  dispose(): void {
    this.sub.dispose();
    this.item.dispose();
  }
}
