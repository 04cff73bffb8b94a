import * as assert from 'assert';
import { buildDiffUris, DiffContentProvider, parseDiffUri, runIdOf, substituteKernel, toDiffUri } from '../src/diff';
import { JobStatus } from '../src/jobs';
import { ORIGINAL_KERNEL, OUTPUT_CODE } from './helpers';
import { Uri } from './mock/vscode';

const RUN = '/work/proj/.kernelopt/runs/20261130-0930-ab12';
const job: JobStatus = {
  jobId: 'j3',
  kind: 'optimize',
  state: 'done',
  kernel: 'triton_poi_fused_add_0',
  uri: 'file:///work/proj/torch_compile_debug/run_1/output_code.py',
  bestSpeedup: 1.234,
  runId: '20261130-0930-ab12',
  originalUri: `file://${RUN}/original_kernel.py`,
  optimizedUri: `file://${RUN}/optimized_kernel.py`,
  diffPath: `${RUN}/final.diff`,
};

describe('diff URIs', () => {
  it('builds kernelopt-diff URIs for the kernel from a jobStatus', () => {
    const uris = buildDiffUris(job, 'kernel');
    assert.ok(uris);
    assert.strictEqual(uris.left.scheme, 'kernelopt-diff');
    assert.strictEqual(uris.right.scheme, 'kernelopt-diff');
    // The tab shows the real file names, so the language is Python.
    assert.strictEqual(uris.left.path, `${RUN}/original_kernel.py`);
    assert.strictEqual(uris.right.path, `${RUN}/optimized_kernel.py`);
    assert.strictEqual(uris.title, 'triton_poi_fused_add_0: original ↔ optimized (1.23×)');
  });

  it('parses the URIs back to the run, side and files', () => {
    const uris = buildDiffUris(job, 'kernel');
    assert.ok(uris);
    assert.deepStrictEqual(parseDiffUri(uris.left), {
      runId: job.runId,
      side: 'original',
      scope: 'kernel',
      originalUri: job.originalUri,
      optimizedUri: job.optimizedUri,
      dumpUri: job.uri,
      kernel: job.kernel,
    });
    assert.strictEqual(parseDiffUri(uris.right)?.side, 'optimized');
  });

  it('round-trips through the string form (what VS Code stores for tabs)', () => {
    const weird: JobStatus = { ...job, runId: 'run&id=1 %2F#x', originalUri: 'file:///a%20b/original_kernel.py' };
    const uris = buildDiffUris(weird, 'graph');
    assert.ok(uris);
    const again = Uri.parse(uris.right.toString());
    assert.deepStrictEqual(parseDiffUri(again as never), parseDiffUri(uris.right));
    assert.strictEqual(runIdOf(again as never), 'run&id=1 %2F#x');
  });

  it('builds whole-graph URIs on the dump path', () => {
    const uris = buildDiffUris(job, 'graph');
    assert.ok(uris);
    assert.strictEqual(uris.left.path, '/work/proj/torch_compile_debug/run_1/output_code.py');
    assert.strictEqual(parseDiffUri(uris.right)?.scope, 'graph');
    assert.match(uris.title, /^output_code\.py: optimized triton_poi_fused_add_0/);
  });

  it('is undefined when the notification lacks the run files', () => {
    assert.strictEqual(buildDiffUris({ ...job, optimizedUri: undefined }, 'kernel'), undefined);
    assert.strictEqual(buildDiffUris({ ...job, runId: undefined }, 'kernel'), undefined);
    assert.strictEqual(buildDiffUris({ ...job, uri: undefined }, 'graph'), undefined);
    assert.ok(buildDiffUris({ ...job, uri: undefined }, 'kernel'));
  });

  it('rejects foreign or incomplete URIs', () => {
    assert.strictEqual(parseDiffUri(Uri.file('/x.py') as never), undefined);
    assert.strictEqual(parseDiffUri(Uri.from({ scheme: 'kernelopt-diff', path: '/x', query: 'runId=1&side=left' }) as never), undefined);
    const graphWithoutDump = toDiffUri({ runId: 'r', side: 'original', scope: 'graph', originalUri: 'file:///a', optimizedUri: 'file:///b' });
    assert.strictEqual(parseDiffUri(graphWithoutDump), undefined);
    assert.strictEqual(runIdOf(undefined), undefined);
  });
});

describe('diff content', () => {
  const OPTIMIZED = ORIGINAL_KERNEL.replace('tmp0 + 1.0', () => 'tmp0 + 1.0  # fused, $& kept');
  const files: Record<string, string> = {
    [job.originalUri as string]: ORIGINAL_KERNEL,
    [job.optimizedUri as string]: OPTIMIZED,
    [job.uri as string]: OUTPUT_CODE,
  };
  const provider = new DiffContentProvider(async (uri) => {
    if (!(uri in files)) {
      throw new Error(`no ${uri}`);
    }
    return files[uri];
  });

  it('serves the original and optimized kernel files', async () => {
    const uris = buildDiffUris(job, 'kernel');
    assert.ok(uris);
    assert.strictEqual(await provider.provideTextDocumentContent(uris.left as never), ORIGINAL_KERNEL);
    assert.strictEqual(await provider.provideTextDocumentContent(uris.right as never), OPTIMIZED);
  });

  it('serves the dump and the dump with the optimized kernel for the whole graph', async () => {
    const uris = buildDiffUris(job, 'graph');
    assert.ok(uris);
    assert.strictEqual(await provider.provideTextDocumentContent(uris.left as never), OUTPUT_CODE);
    const right = await provider.provideTextDocumentContent(uris.right as never);
    assert.ok(right.includes('tmp0 + 1.0  # fused, $& kept'));
    assert.ok(right.includes('triton_red_fused_sum_1'));
    assert.strictEqual(right.split('\n').length, OUTPUT_CODE.split('\n').length);
  });

  it('refuses a URI of another scheme', async () => {
    await assert.rejects(() => provider.provideTextDocumentContent(Uri.file('/x') as never));
  });
});

describe('substituteKernel', () => {
  it('replaces the exact kernel source, once, keeping `$` patterns literal', () => {
    const out = substituteKernel(OUTPUT_CODE, ORIGINAL_KERNEL, 'NEW $& $1\n');
    assert.ok(out);
    assert.ok(out.includes('NEW $& $1'));
    assert.ok(!out.includes('tmp0 + 1.0'));
    assert.ok(out.includes("''', device_str='cuda')"));
  });

  it('falls back to the async_compile block of the named kernel', () => {
    const out = substituteKernel(OUTPUT_CODE, 'source that differs in whitespace', 'NEW BODY', 'triton_red_fused_sum_1');
    assert.ok(out);
    const lines = out.split('\n');
    const head = lines.findIndex((l) => l.startsWith('triton_red_fused_sum_1 = '));
    assert.strictEqual(lines[head + 1], 'NEW BODY');
    assert.ok(lines[head + 2].startsWith("''', device_str"));
    assert.ok(out.includes('tmp0 + 1.0'), 'the other kernel is untouched');
  });

  it('is undefined when the kernel cannot be located', () => {
    assert.strictEqual(substituteKernel(OUTPUT_CODE, 'nope', 'x'), undefined);
    assert.strictEqual(substituteKernel(OUTPUT_CODE, 'nope', 'x', 'triton_missing'), undefined);
  });
});
