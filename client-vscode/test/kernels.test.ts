import * as assert from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import { findKernelAt, listKernels } from '../src/kernels';
import { lineOf, OUTPUT_CODE } from './helpers';

describe('kernel under the cursor', () => {
  it('lists the async_compile kernels of output_code.py', () => {
    assert.deepStrictEqual(
      listKernels(OUTPUT_CODE).map((k) => k.name),
      ['triton_poi_fused_add_0', 'triton_red_fused_sum_1'],
    );
  });

  it('finds the kernel whose source contains the cursor', () => {
    assert.strictEqual(findKernelAt(OUTPUT_CODE, lineOf(OUTPUT_CODE, 'tmp0 = tl.load'), 'tmp0'), 'triton_poi_fused_add_0');
    assert.strictEqual(findKernelAt(OUTPUT_CODE, lineOf(OUTPUT_CODE, '_tmp2 = tl.full')), 'triton_red_fused_sum_1');
    assert.strictEqual(findKernelAt(OUTPUT_CODE, lineOf(OUTPUT_CODE, "triton_red_fused_sum_1 = async")), 'triton_red_fused_sum_1');
  });

  it('counts the comment block above a kernel as part of it', () => {
    assert.strictEqual(findKernelAt(OUTPUT_CODE, lineOf(OUTPUT_CODE, 'Topologically Sorted')), 'triton_poi_fused_add_0');
  });

  it('uses the word under the cursor at a .run() call site', () => {
    const line = lineOf(OUTPUT_CODE, 'triton_red_fused_sum_1.run(');
    assert.strictEqual(findKernelAt(OUTPUT_CODE, line, 'triton_red_fused_sum_1'), 'triton_red_fused_sum_1');
    // Elsewhere in call() there is no kernel to act on.
    assert.strictEqual(findKernelAt(OUTPUT_CODE, line, 'stream0'), undefined);
    assert.strictEqual(findKernelAt(OUTPUT_CODE, lineOf(OUTPUT_CODE, 'from ctypes')), undefined);
  });

  it('handles standalone kernel files with decorators', () => {
    const src = [
      'import triton',
      '',
      '@triton_heuristics.pointwise(',
      "    size_hints={'x': 1024},",
      ')',
      '@triton.jit',
      'def my_kernel(in_ptr0, XBLOCK: tl.constexpr):',
      '    x = tl.load(in_ptr0)',
      '',
      '    tl.store(in_ptr0, x)',
      '',
      'def helper():',
      '    return 1',
    ].join('\n');
    assert.deepStrictEqual(listKernels(src), [{ name: 'my_kernel', start: 2, end: 9 }]);
    assert.strictEqual(findKernelAt(src, 3), 'my_kernel');
    assert.strictEqual(findKernelAt(src, 9), 'my_kernel');
    assert.strictEqual(findKernelAt(src, 12), undefined);
  });

  // The repository's recorded dumps, when this runs inside the KernelOPT checkout.
  const fixtures = path.join(__dirname, '..', '..', '..', 'tests', 'fixtures');
  const dumps = fs.existsSync(fixtures)
    ? fs
        .readdirSync(fixtures, { recursive: true, encoding: 'utf8' })
        .filter((f) => f.endsWith('output_code.py'))
        .map((f) => path.join(fixtures, f))
    : [];
  (dumps.length > 0 ? it : it.skip)(`finds every kernel in the recorded dumps (${dumps.length})`, () => {
    for (const file of dumps) {
      const text = fs.readFileSync(file, 'utf8');
      const expected = [...text.matchAll(/^(\w+) = async_compile\.triton\('(\w+)'/gm)].map((m) => m[2]);
      assert.deepStrictEqual(listKernels(text).map((k) => k.name), expected, file);
      for (const name of expected) {
        const inside = text.split('\n').findIndex((l) => l.startsWith(`def ${name}(`));
        if (inside >= 0) {
          assert.strictEqual(findKernelAt(text, inside + 1), name, `${file}:${inside + 2}`);
        }
      }
    }
  });
});
