// Which Triton kernel the cursor is in, found from the text alone (the client commands need a name
// to send; the server does the real parsing). Handles both layouts Inductor writes:
//   output_code.py:  name = async_compile.triton('name', '''<source>''', device_str='cuda')
//   kernel files:    @triton.jit \n def name(...):

export interface KernelSpan {
  name: string;
  /** First and last line (0-based, inclusive) that belong to the kernel, comments above included. */
  start: number;
  end: number;
}

const ASYNC_DEF = /^([A-Za-z_]\w*)\s*=\s*async_compile\.triton\(\s*(['"])([A-Za-z_]\w*)\2/;
const STRING_END = /^'''|^"""/;
const DEF = /^def\s+([A-Za-z_]\w*)\s*\(/;
const DECORATOR = /^@/;
const TRITON_DECORATOR = /^@(triton\.(jit|autotune|heuristics)|triton_heuristics\.)/;

/** A top-level statement other than a decorator or comment ends a kernel defined with `def`. */
function isTopLevelCode(line: string): boolean {
  return line.length > 0 && !/^\s/.test(line) && !line.startsWith('#') && !DECORATOR.test(line) && !STRING_END.test(line);
}

/** The comment block right above line `i`, which Inductor fills with the kernel's source nodes. */
function commentStart(lines: readonly string[], i: number): number {
  let s = i;
  while (s > 0 && lines[s - 1].startsWith('#')) {
    s--;
  }
  return s;
}

export function listKernels(text: string): KernelSpan[] {
  const lines = text.split(/\r?\n/);
  const spans: KernelSpan[] = [];
  let i = 0;
  while (i < lines.length) {
    const m = ASYNC_DEF.exec(lines[i]);
    if (m) {
      let end = i + 1;
      while (end < lines.length && !STRING_END.test(lines[end])) {
        end++;
      }
      spans.push({ name: m[3], start: commentStart(lines, i), end: Math.min(end, lines.length - 1) });
      i = end + 1;
      continue;
    }
    const d = DEF.exec(lines[i]);
    if (d && isTritonDef(lines, i, d[1])) {
      let start = i;
      while (start > 0 && (DECORATOR.test(lines[start - 1]) || /^\s/.test(lines[start - 1]) || lines[start - 1].startsWith(')'))) {
        // Decorators may span several lines (`@triton_heuristics.pointwise(\n ... \n)`).
        if (!DECORATOR.test(lines[start - 1]) && !decoratorAbove(lines, start - 1)) {
          break;
        }
        start--;
      }
      let end = i + 1;
      while (end < lines.length && !isTopLevelCode(lines[end]) && !DECORATOR.test(lines[end])) {
        end++;
      }
      // Trailing blank lines belong to nobody.
      let last = end - 1;
      while (last > i && lines[last].trim() === '') {
        last--;
      }
      spans.push({ name: d[1], start: commentStart(lines, start), end: last });
      i = end;
      continue;
    }
    i++;
  }
  return spans;
}

/** Whether a multi-line decorator's opening `@` line sits above line `i` (only indented lines between). */
function decoratorAbove(lines: readonly string[], i: number): boolean {
  for (let k = i; k >= 0; k--) {
    if (DECORATOR.test(lines[k])) {
      return true;
    }
    if (!/^\s/.test(lines[k]) && !lines[k].startsWith(')')) {
      return false;
    }
  }
  return false;
}

/** A `def` is a kernel when a Triton decorator precedes it, or when it has Inductor's triton_ prefix. */
function isTritonDef(lines: readonly string[], i: number, name: string): boolean {
  if (name.startsWith('triton_')) {
    return true;
  }
  for (let k = i - 1; k >= 0 && k >= i - 40; k--) {
    if (TRITON_DECORATOR.test(lines[k])) {
      return true;
    }
    if (isTopLevelCode(lines[k]) && !lines[k].startsWith(')')) {
      return false;
    }
  }
  return false;
}

/**
 * The kernel at `line`: the word under the cursor when it names a kernel (e.g. a
 * `triton_poi_fused_add_0.run(...)` call in `call()`), else the kernel whose text contains the line.
 */
export function findKernelAt(text: string, line: number, word?: string): string | undefined {
  const spans = listKernels(text);
  if (word && spans.some((s) => s.name === word)) {
    return word;
  }
  // Kernels nested in an async_compile string also match as `def`; the innermost (latest start) wins.
  let best: KernelSpan | undefined;
  for (const s of spans) {
    if (line >= s.start && line <= s.end && (!best || s.start >= best.start)) {
      best = s;
    }
  }
  return best?.name;
}
