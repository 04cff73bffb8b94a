// The state of the server's jobs, fed by `kernelopt/jobStatus` notifications. No vscode API here.

export type JobKind = 'optimize' | 'profile' | 'verify';
export type JobState = 'queued' | 'running' | 'done' | 'failed' | 'cancelled';

/** One `kernelopt/jobStatus` notification (docs/lsp-contract.md); only jobId and state are required. */
export interface JobStatus {
  jobId: string;
  kind: JobKind;
  state: JobState;
  kernel?: string;
  uri?: string;
  message?: string;
  iteration?: number;
  iterations?: number;
  bestSpeedup?: number;
  runId?: string;
  originalUri?: string;
  optimizedUri?: string;
  diffPath?: string;
}

const KINDS: readonly JobKind[] = ['optimize', 'profile', 'verify'];
const STATES: readonly JobState[] = ['queued', 'running', 'done', 'failed', 'cancelled'];

export function isActive(job: JobStatus): boolean {
  return job.state === 'queued' || job.state === 'running';
}

/** An optimize run the user has not yet applied or discarded. */
/** An optimize run with a kernel to review: one that kept the compiler's kernel has no diff. */
export function hasDiff(job: JobStatus): boolean {
  return job.optimizedUri !== undefined || job.diffPath !== undefined;
}

export function isPendingResult(job: JobStatus): boolean {
  return job.kind === 'optimize' && job.state === 'done' && typeof job.runId === 'string' && job.runId !== '' && hasDiff(job);
}

function optString(v: unknown): string | undefined {
  return typeof v === 'string' && v !== '' ? v : undefined;
}
function optNumber(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
}

/** Validates a notification payload; anything malformed is dropped rather than shown half-broken. */
export function parseJobStatus(raw: unknown): JobStatus | undefined {
  if (!raw || typeof raw !== 'object') {
    return undefined;
  }
  const r = raw as Record<string, unknown>;
  const jobId = optString(r.jobId);
  const state = r.state as JobState;
  if (!jobId || !STATES.includes(state)) {
    return undefined;
  }
  const kind = KINDS.includes(r.kind as JobKind) ? (r.kind as JobKind) : 'optimize';
  const job: JobStatus = { jobId, kind, state };
  const strings = ['kernel', 'uri', 'message', 'runId', 'originalUri', 'optimizedUri', 'diffPath'] as const;
  for (const key of strings) {
    const v = optString(r[key]);
    if (v !== undefined) {
      job[key] = v;
    }
  }
  const numbers = ['iteration', 'iterations', 'bestSpeedup'] as const;
  for (const key of numbers) {
    const v = optNumber(r[key]);
    if (v !== undefined) {
      job[key] = v;
    }
  }
  return job;
}

export interface JobUpdate {
  previous: JobStatus | undefined;
  current: JobStatus;
  /** The job reached done/failed/cancelled with this notification (not a repeat). */
  finished: boolean;
}

type Listener = () => void;

/** Jobs by id, in arrival order; finished ones are kept (bounded) so their results can be reviewed. */
export class JobTracker {
  private readonly jobs = new Map<string, JobStatus>();
  private readonly resolvedRuns = new Set<string>();
  private readonly listeners = new Set<Listener>();

  constructor(private readonly maxFinished = 20) {}

  update(job: JobStatus): JobUpdate {
    const previous = this.jobs.get(job.jobId);
    // Notifications may omit fields that an earlier one carried (e.g. bestSpeedup); keep them.
    const current: JobStatus = { ...previous, ...job };
    // Re-inserting moves the job to the end, so the map stays ordered by latest activity.
    this.jobs.delete(job.jobId);
    this.jobs.set(job.jobId, current);
    this.prune();
    this.emit();
    return { previous, current, finished: !isActive(current) && (previous === undefined || isActive(previous)) };
  }

  get(jobId: string): JobStatus | undefined {
    return this.jobs.get(jobId);
  }

  all(): JobStatus[] {
    return [...this.jobs.values()];
  }

  active(): JobStatus[] {
    return this.all().filter(isActive);
  }

  /** Finished optimize runs not yet applied or discarded, newest first. */
  pendingResults(): JobStatus[] {
    return this.all()
      .filter((j) => isPendingResult(j) && !this.resolvedRuns.has(j.runId as string))
      .reverse();
  }

  findRun(runId: string): JobStatus | undefined {
    return this.all().find((j) => j.runId === runId);
  }

  /** Marks a run as applied or discarded, so it no longer shows as a pending result. */
  resolveRun(runId: string): void {
    this.resolvedRuns.add(runId);
    this.emit();
  }

  /** The server restarted: its jobs are gone, but finished results on disk can still be reviewed. */
  dropActive(): void {
    for (const job of this.active()) {
      this.jobs.delete(job.jobId);
    }
    this.emit();
  }

  onDidChange(listener: Listener): { dispose(): void } {
    this.listeners.add(listener);
    return { dispose: () => this.listeners.delete(listener) };
  }

  private prune(): void {
    const finished = this.all().filter((j) => !isActive(j));
    for (const job of finished.slice(0, Math.max(0, finished.length - this.maxFinished))) {
      this.jobs.delete(job.jobId);
    }
  }

  private emit(): void {
    for (const l of [...this.listeners]) {
      l();
    }
  }
}
