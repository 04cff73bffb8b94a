import * as assert from 'assert';
import { JobStatus, JobTracker, parseJobStatus } from '../src/jobs';
import { formatJob, formatSpeedup, formatStatus, jobsMenuItems, StatusBar } from '../src/status';
import { __mock } from './mock/vscode';

const running = (over: Partial<JobStatus> = {}): JobStatus => ({
  jobId: 'j1',
  kind: 'optimize',
  state: 'running',
  kernel: 'triton_poi_fused_add_0',
  ...over,
});

describe('status text', () => {
  it('formats speedups with two decimals and ×', () => {
    assert.strictEqual(formatSpeedup(1.234), '1.23×');
    assert.strictEqual(formatSpeedup(2), '2.00×');
    assert.strictEqual(formatSpeedup(0.996), '1.00×');
  });

  it('shows idle with nothing going on', () => {
    assert.strictEqual(formatStatus('running', [], []).text, '$(zap) KernelOPT: idle');
  });

  it('shows optimizing i/n for a running optimize job', () => {
    assert.strictEqual(formatStatus('running', [running({ iteration: 3, iterations: 5 })], []).text, '$(sync~spin) KernelOPT: optimizing 3/5');
  });

  it('adds the best speedup so far while optimizing', () => {
    assert.strictEqual(formatJob(running({ iteration: 3, iterations: 5, bestSpeedup: 1.23 })), 'optimizing 3/5 · best 1.23×');
  });

  it('names queued, profiling and verifying jobs', () => {
    assert.strictEqual(formatJob(running({ state: 'queued', iteration: 1, iterations: 5 })), 'queued');
    assert.strictEqual(formatJob(running({ kind: 'profile' })), 'profiling');
    assert.strictEqual(formatJob(running({ kind: 'verify', bestSpeedup: 2 })), 'verifying');
  });

  it('counts other active jobs and shows the newest', () => {
    const view = formatStatus('running', [running({ jobId: 'a', kind: 'profile' }), running({ jobId: 'b', iteration: 1, iterations: 5 })], []);
    assert.strictEqual(view.text, '$(sync~spin) KernelOPT: optimizing 1/5 (+1)');
    assert.match(view.tooltip, /profile triton_poi_fused_add_0: running/);
  });

  it('shows best N× for an unreviewed result', () => {
    const done = running({ state: 'done', bestSpeedup: 1.23, runId: 'r1' });
    assert.strictEqual(formatStatus('running', [], [done]).text, '$(check) KernelOPT: best 1.23×');
    assert.strictEqual(formatStatus('running', [], [{ ...done, bestSpeedup: undefined }]).text, '$(check) KernelOPT: result ready');
  });

  it('running jobs win over results, a stopped server over both', () => {
    const done = running({ jobId: 'd', state: 'done', bestSpeedup: 1.5, runId: 'r' });
    assert.match(formatStatus('running', [running()], [done]).text, /optimizing/);
    const stopped = formatStatus('failed', [running()], [done]);
    assert.strictEqual(stopped.text, '$(error) KernelOPT: stopped');
    assert.ok(stopped.warning);
    assert.strictEqual(formatStatus('starting', [], []).text, '$(loading~spin) KernelOPT: starting');
  });
});

describe('jobs menu', () => {
  it('offers to cancel each running job, all of them, review results and show output', () => {
    const items = jobsMenuItems(
      [running({ jobId: 'a', message: 'iteration 1/5 · gate 2' }), running({ jobId: 'b', kind: 'profile' })],
      [running({ jobId: 'c', state: 'done', runId: 'r9', bestSpeedup: 1.1 })],
    );
    assert.deepStrictEqual(
      items.map((i) => i.action),
      [{ type: 'cancel', jobId: 'b' }, { type: 'cancel', jobId: 'a' }, { type: 'cancel' }, { type: 'showDiff', runId: 'r9' }, { type: 'showOutput' }],
    );
    assert.strictEqual(items[1].detail, 'iteration 1/5 · gate 2');
    assert.strictEqual(items[3].description, 'best 1.10×');
  });

  it('has no "cancel all" for a single job', () => {
    const items = jobsMenuItems([running()], []);
    assert.deepStrictEqual(items.map((i) => i.action.type), ['cancel', 'showOutput']);
  });
});

describe('parseJobStatus', () => {
  it('accepts the contract example', () => {
    const job = parseJobStatus({
      jobId: 'j3',
      kind: 'optimize',
      state: 'running',
      kernel: 'triton_poi_x',
      uri: 'file:///w/output_code.py',
      message: 'iteration 3/5 · gate 2',
      iteration: 3,
      iterations: 5,
      bestSpeedup: 1.23,
      runId: '20261130-x',
      originalUri: 'file:///o',
      optimizedUri: 'file:///p',
      diffPath: '/d/final.diff',
    });
    assert.ok(job);
    assert.strictEqual(job.iteration, 3);
    assert.strictEqual(job.optimizedUri, 'file:///p');
  });

  it('drops malformed payloads and bad fields', () => {
    assert.strictEqual(parseJobStatus(null), undefined);
    assert.strictEqual(parseJobStatus({ jobId: 'j', state: 'exploded' }), undefined);
    assert.strictEqual(parseJobStatus({ state: 'running' }), undefined);
    const job = parseJobStatus({ jobId: 'j', state: 'running', kind: 'weird', iteration: 'three', bestSpeedup: NaN });
    assert.deepStrictEqual(job, { jobId: 'j', kind: 'optimize', state: 'running' });
  });
});

describe('JobTracker', () => {
  it('merges updates, reports the first finish only, and tracks pending results', () => {
    const t = new JobTracker();
    t.update(running({ iteration: 1, iterations: 5, bestSpeedup: 1.1 }));
    const u = t.update({ jobId: 'j1', kind: 'optimize', state: 'done', runId: 'r1', optimizedUri: 'file:///r/optimized_kernel.py' });
    assert.ok(u.finished);
    assert.strictEqual(u.current.bestSpeedup, 1.1, 'fields from earlier notifications are kept');
    assert.strictEqual(t.update({ jobId: 'j1', kind: 'optimize', state: 'done', runId: 'r1', optimizedUri: 'file:///r/optimized_kernel.py' }).finished, false);
    assert.deepStrictEqual(t.pendingResults().map((j) => j.runId), ['r1']);
    t.resolveRun('r1');
    assert.deepStrictEqual(t.pendingResults(), []);
  });

  it('has no result to review for a run that kept the compiler kernel (no diff)', () => {
    const t = new JobTracker();
    t.update({ jobId: 'j1', kind: 'optimize', state: 'done', runId: 'r1', bestSpeedup: 1.0, message: 'kept the compiler kernel' });
    assert.deepStrictEqual(t.pendingResults(), []);
    t.update({ jobId: 'j2', kind: 'optimize', state: 'done', runId: 'r2', diffPath: '/r2/final.diff' });
    assert.deepStrictEqual(t.pendingResults().map((j) => j.runId), ['r2']);
  });

  it('forgets active jobs when the server goes away, keeps results', () => {
    const t = new JobTracker();
    t.update(running({ jobId: 'a' }));
    t.update(running({ jobId: 'b', state: 'done', runId: 'r', optimizedUri: 'file:///r/optimized_kernel.py' }));
    t.dropActive();
    assert.deepStrictEqual(t.active(), []);
    assert.strictEqual(t.pendingResults().length, 1);
  });

  it('keeps a bounded number of finished jobs', () => {
    const t = new JobTracker(3);
    for (let i = 0; i < 10; i++) {
      t.update(running({ jobId: `j${i}`, state: 'failed' }));
    }
    assert.deepStrictEqual(t.all().map((j) => j.jobId), ['j7', 'j8', 'j9']);
  });
});

describe('StatusBar item', () => {
  beforeEach(() => __mock.reset());

  it('follows tracker updates and opens the jobs menu on click', () => {
    const tracker = new JobTracker();
    const bar = new StatusBar(tracker);
    const item = __mock.state.statusItems[0];
    assert.strictEqual(item.command, 'kernelopt.jobsMenu');
    assert.ok(item.visible);
    bar.setServerState('running');
    assert.strictEqual(item.text, '$(zap) KernelOPT: idle');
    tracker.update(running({ iteration: 3, iterations: 5 }));
    assert.strictEqual(item.text, '$(sync~spin) KernelOPT: optimizing 3/5');
    tracker.update(running({ state: 'done', bestSpeedup: 1.23, runId: 'r', optimizedUri: 'file:///r/optimized_kernel.py' }));
    assert.strictEqual(item.text, '$(check) KernelOPT: best 1.23×');
    bar.setServerState('stopped');
    assert.ok(item.backgroundColor);
    bar.dispose();
    assert.ok(item.disposed);
  });
});
