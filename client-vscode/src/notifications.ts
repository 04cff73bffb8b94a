// `kernelopt/jobStatus` handling: update the tracker, and tell the user once when a job ends.
import * as vscode from 'vscode';
import { ClientCommand, JOB_STATUS_NOTIFICATION } from './ids';
import { hasDiff, JobStatus, JobTracker, parseJobStatus } from './jobs';
import { formatSpeedup } from './status';

export interface JobStatusSink {
  tracker: JobTracker;
  output: { info(message: string): void; warn(message: string): void; show(preserveFocus?: boolean): void };
}

/** The message shown when a job ends, or undefined for endings that need none (cancelled). */
export function finishMessage(job: JobStatus): string | undefined {
  const kernel = job.kernel ?? job.jobId;
  switch (job.state) {
    case 'done':
      if (job.kind === 'optimize' && hasDiff(job)) {
        const best = job.bestSpeedup !== undefined ? `best ${formatSpeedup(job.bestSpeedup)}` : 'done';
        return `KernelOPT: optimized ${kernel}, ${best}.`;
      }
      return `KernelOPT: ${job.kind} ${kernel} done${job.message ? `: ${job.message}` : '.'}`;
    case 'failed':
      return `KernelOPT: ${job.kind} ${kernel} failed${job.message ? `: ${job.message}` : '.'}`;
    default:
      return undefined;
  }
}

export function jobStatusHandler(sink: JobStatusSink): (raw: unknown) => void {
  return (raw) => {
    const job = parseJobStatus(raw);
    if (!job) {
      sink.output.warn(`ignored a malformed ${JOB_STATUS_NOTIFICATION} notification`);
      return;
    }
    const { current, finished } = sink.tracker.update(job);
    if (finished) {
      void announce(current, sink);
    }
  };
}

async function announce(job: JobStatus, sink: JobStatusSink): Promise<void> {
  const text = finishMessage(job);
  if (!text) {
    return;
  }
  sink.output.info(text);
  if (job.state === 'failed') {
    if ((await vscode.window.showErrorMessage(text, 'Show Output')) === 'Show Output') {
      sink.output.show(true);
    }
    return;
  }
  // A run that kept the compiler's kernel has nothing to review or apply: its message says why.
  if (job.kind === 'optimize' && job.runId && hasDiff(job)) {
    const choice = await vscode.window.showInformationMessage(text, 'Show Diff', 'Apply', 'Discard');
    const command =
      choice === 'Show Diff' ? ClientCommand.showDiff : choice === 'Apply' ? ClientCommand.applyResult : choice === 'Discard' ? ClientCommand.discardResult : undefined;
    if (command) {
      await vscode.commands.executeCommand(command, { runId: job.runId });
    }
    return;
  }
  void vscode.window.showInformationMessage(text);
}
