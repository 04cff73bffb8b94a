// Shared test utilities.
import * as fs from 'fs';
import * as path from 'path';

/** Lets pending promise chains (fire-and-forget `void` calls) run to completion. */
export async function flush(rounds = 10): Promise<void> {
  for (let i = 0; i < rounds; i++) {
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/** client-vscode/package.json, read from disk: the manifest VS Code will actually see. */
export function manifest(): any {
  return JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'package.json'), 'utf8'));
}

/** A trimmed Inductor output_code.py with two kernels, as torch 2.11 writes it. */
export const OUTPUT_CODE = `# AOT ID: ['0_inference']
from ctypes import c_void_p, c_long, c_int
import torch
from torch._inductor.async_compile import AsyncCompile

async_compile = AsyncCompile()

# kernel path: /tmp/torchinductor_root/ab/cabc.py
# Topologically Sorted Source Nodes: [add], Original ATen: [aten.add]
# Source node to ATen node mapping:
#   add => add
triton_poi_fused_add_0 = async_compile.triton('triton_poi_fused_add_0', '''
import triton
import triton.language as tl

@triton_heuristics.pointwise(
    size_hints={'x': 1024},
    filename=__file__,
)
@triton.jit
def triton_poi_fused_add_0(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    tmp0 = tl.load(in_ptr0 + (xindex), None)
    tl.store(out_ptr0 + (xindex), tmp0 + 1.0, None)
''', device_str='cuda')


# kernel path: /tmp/torchinductor_root/cd/ccd.py
triton_red_fused_sum_1 = async_compile.triton('triton_red_fused_sum_1', '''
import triton
import triton.language as tl

@triton.jit
def triton_red_fused_sum_1(in_ptr0, out_ptr0, xnumel, r0_numel, XBLOCK : tl.constexpr):
    _tmp2 = tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)
    tl.store(out_ptr0 + (x0), tmp2, xmask)
''', device_str='cuda')


async_compile.wait(globals())
del async_compile

def call(args):
    arg0_1, = args
    with torch.cuda._DeviceGuard(0):
        buf0 = empty_strided_cuda((1024, ), (1, ), torch.float32)
        triton_poi_fused_add_0.run(arg0_1, buf0, 1024, stream=stream0)
        triton_red_fused_sum_1.run(buf0, buf1, 1, 1024, stream=stream0)
    return (buf1, )
`;

/** The first kernel's source as the server writes it to original_kernel.py. */
export const ORIGINAL_KERNEL = OUTPUT_CODE.slice(
  OUTPUT_CODE.indexOf("'''\n", OUTPUT_CODE.indexOf('triton_poi_fused_add_0 = ')) + 4,
  OUTPUT_CODE.indexOf("''', device_str"),
);

export function lineOf(text: string, needle: string): number {
  const i = text.split('\n').findIndex((l) => l.includes(needle));
  if (i < 0) {
    throw new Error(`not found: ${needle}`);
  }
  return i;
}
