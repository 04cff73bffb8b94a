// Diff review of a run: read-only `kernelopt-diff:` documents for the original and optimized
// kernel (or the whole dump with the kernel swapped in), shown with the built-in `vscode.diff`.
import * as vscode from 'vscode';
import { DIFF_SCHEME } from './ids';
import { JobStatus } from './jobs';
import { formatSpeedup } from './status';

export type DiffSide = 'original' | 'optimized';
/** `kernel`: original_kernel.py vs optimized_kernel.py. `graph`: the dump vs the dump with the optimized kernel. */
export type DiffScope = 'kernel' | 'graph';

/** Everything needed to produce one side's text, carried in the URI's query. */
export interface DiffRef {
  runId: string;
  side: DiffSide;
  scope: DiffScope;
  originalUri: string;
  optimizedUri: string;
  dumpUri?: string;
  kernel?: string;
}

export interface DiffUris {
  left: vscode.Uri;
  right: vscode.Uri;
  title: string;
}

function basename(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1);
}

export function toDiffUri(ref: DiffRef): vscode.Uri {
  const q = new URLSearchParams({
    runId: ref.runId,
    side: ref.side,
    scope: ref.scope,
    original: ref.originalUri,
    optimized: ref.optimizedUri,
  });
  if (ref.dumpUri) {
    q.set('dump', ref.dumpUri);
  }
  if (ref.kernel) {
    q.set('kernel', ref.kernel);
  }
  // The path is the real file's, so the tab shows its name and the language is detected from `.py`.
  const shown = ref.scope === 'graph' && ref.dumpUri ? ref.dumpUri : ref.side === 'original' ? ref.originalUri : ref.optimizedUri;
  return vscode.Uri.from({ scheme: DIFF_SCHEME, path: vscode.Uri.parse(shown).path, query: q.toString() });
}

export function parseDiffUri(uri: vscode.Uri): DiffRef | undefined {
  if (uri.scheme !== DIFF_SCHEME) {
    return undefined;
  }
  const q = new URLSearchParams(uri.query);
  const runId = q.get('runId');
  const side = q.get('side');
  const scope = q.get('scope');
  const originalUri = q.get('original');
  const optimizedUri = q.get('optimized');
  if (!runId || !originalUri || !optimizedUri || (side !== 'original' && side !== 'optimized') || (scope !== 'kernel' && scope !== 'graph')) {
    return undefined;
  }
  const ref: DiffRef = { runId, side, scope, originalUri, optimizedUri };
  const dump = q.get('dump');
  const kernel = q.get('kernel');
  if (dump) {
    ref.dumpUri = dump;
  }
  if (kernel) {
    ref.kernel = kernel;
  }
  if (scope === 'graph' && !ref.dumpUri) {
    return undefined;
  }
  return ref;
}

/** The left/right URIs and tab title for a finished run; undefined when the notification lacks the files. */
export function buildDiffUris(job: JobStatus, scope: DiffScope): DiffUris | undefined {
  if (!job.runId || !job.originalUri || !job.optimizedUri || (scope === 'graph' && !job.uri)) {
    return undefined;
  }
  const base: Omit<DiffRef, 'side'> = { runId: job.runId, scope, originalUri: job.originalUri, optimizedUri: job.optimizedUri };
  if (job.uri) {
    base.dumpUri = job.uri;
  }
  if (job.kernel) {
    base.kernel = job.kernel;
  }
  const speed = job.bestSpeedup !== undefined ? ` (${formatSpeedup(job.bestSpeedup)})` : '';
  const name = job.kernel ?? job.runId;
  const title =
    scope === 'graph'
      ? `${basename(vscode.Uri.parse(job.uri as string).path)}: optimized ${name}${speed}`
      : `${name}: original ↔ optimized${speed}`;
  return { left: toDiffUri({ ...base, side: 'original' }), right: toDiffUri({ ...base, side: 'optimized' }), title };
}

function trimEnds(s: string): string {
  return s.replace(/^(\s*\n)+/, '').replace(/\s+$/, '');
}

/**
 * The dump with the original kernel source replaced by the optimized one. Tries the exact source
 * first, then the body of `name = async_compile.triton('name', '''...''')`. Undefined if neither
 * is found, so the caller can fall back to the kernel-only diff instead of showing a wrong file.
 */
export function substituteKernel(dump: string, original: string, optimized: string, kernel?: string): string | undefined {
  const needle = trimEnds(original);
  const replacement = trimEnds(optimized);
  // Slicing, not String.replace: kernel source may contain `$&`-style replacement patterns.
  const at = needle ? dump.indexOf(needle) : -1;
  if (at >= 0) {
    return dump.slice(0, at) + replacement + dump.slice(at + needle.length);
  }
  if (!kernel) {
    return undefined;
  }
  const lines = dump.split('\n');
  const head = lines.findIndex((l) => l.startsWith(`${kernel} = async_compile.triton(`) && l.trimEnd().endsWith("'''"));
  if (head < 0) {
    return undefined;
  }
  const tail = lines.findIndex((l, i) => i > head && l.startsWith("'''"));
  if (tail < 0) {
    return undefined;
  }
  return [...lines.slice(0, head + 1), replacement, ...lines.slice(tail)].join('\n');
}

export type ReadText = (uri: string) => Promise<string>;

/** Reads through the VS Code file system API, so remote workspaces work too. */
export const readWorkspaceText: ReadText = async (uri) =>
  new TextDecoder('utf-8').decode(await vscode.workspace.fs.readFile(vscode.Uri.parse(uri)));

export class SubstitutionError extends Error {}

/** Serves `kernelopt-diff:` documents. Contents are read from disk on every request, never cached. */
export class DiffContentProvider implements vscode.TextDocumentContentProvider {
  constructor(private readonly read: ReadText = readWorkspaceText) {}

  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    const ref = parseDiffUri(uri);
    if (!ref) {
      throw new Error(`not a KernelOPT diff URI: ${uri.toString()}`);
    }
    return this.content(ref);
  }

  async content(ref: DiffRef): Promise<string> {
    if (ref.scope === 'kernel') {
      return this.read(ref.side === 'original' ? ref.originalUri : ref.optimizedUri);
    }
    const dump = await this.read(ref.dumpUri as string);
    if (ref.side === 'original') {
      return dump;
    }
    const [original, optimized] = await Promise.all([this.read(ref.originalUri), this.read(ref.optimizedUri)]);
    const swapped = substituteKernel(dump, original, optimized, ref.kernel);
    if (swapped === undefined) {
      throw new SubstitutionError(`kernel ${ref.kernel ?? ''} not found in ${ref.dumpUri}`);
    }
    return swapped;
  }
}

/**
 * Opens the diff for a run. A graph diff whose kernel cannot be located in the dump (the dump was
 * recompiled since, say) falls back to the kernel diff, with a warning.
 */
export async function openDiff(job: JobStatus, scope: DiffScope, provider: DiffContentProvider): Promise<DiffUris | undefined> {
  let uris = buildDiffUris(job, scope);
  if (uris && scope === 'graph') {
    try {
      const ref = parseDiffUri(uris.right);
      if (ref) {
        await provider.content(ref);
      }
    } catch (e) {
      void vscode.window.showWarningMessage(`KernelOPT: showing the kernel diff instead of the whole graph (${(e as Error).message}).`);
      uris = buildDiffUris(job, 'kernel');
    }
  }
  if (!uris) {
    return undefined;
  }
  await vscode.commands.executeCommand('vscode.diff', uris.left, uris.right, uris.title, { preview: false });
  return uris;
}

/** The run shown by a `kernelopt-diff:` URI. */
export function runIdOf(uri: vscode.Uri | undefined): string | undefined {
  return uri ? parseDiffUri(uri)?.runId : undefined;
}

/** Closes the diff tabs of a run once it is applied or discarded. */
export async function closeDiffTabs(runId: string): Promise<number> {
  const tabs = vscode.window.tabGroups.all
    .flatMap((g) => g.tabs)
    .filter((t) => t.input instanceof vscode.TabInputTextDiff && runIdOf(t.input.modified) === runId);
  if (tabs.length > 0) {
    await vscode.window.tabGroups.close(tabs);
  }
  return tabs.length;
}
