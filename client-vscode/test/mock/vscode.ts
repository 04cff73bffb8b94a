// A small stand-in for the `vscode` module: just the API the extension uses, with recorders so
// tests can see what was registered, shown and asked. `__mock.reset()` restores a clean editor.
/* eslint-disable @typescript-eslint/no-explicit-any */

// ---------------------------------------------------------------------------------------------
// Basic types
// ---------------------------------------------------------------------------------------------

const encodeMin = (s: string, chars: RegExp): string => s.replace(chars, (c) => encodeURIComponent(c));

export class Uri {
  private constructor(
    readonly scheme: string,
    readonly authority: string,
    readonly path: string,
    readonly query: string,
    readonly fragment: string,
  ) {}

  static parse(value: string): Uri {
    const m = /^([a-zA-Z][\w+.-]*):(?:\/\/([^/?#]*))?([^?#]*)(?:\?([^#]*))?(?:#(.*))?$/.exec(value);
    if (!m) {
      throw new Error(`mock Uri.parse: cannot parse ${value}`);
    }
    const dec = (s: string | undefined) => (s ? decodeURIComponent(s) : '');
    return new Uri(m[1], dec(m[2]), dec(m[3]), dec(m[4]), dec(m[5]));
  }

  static file(fsPath: string): Uri {
    const p = fsPath.replace(/\\/g, '/');
    return new Uri('file', '', p.startsWith('/') ? p : `/${p}`, '', '');
  }

  static from(c: { scheme: string; authority?: string; path?: string; query?: string; fragment?: string }): Uri {
    return new Uri(c.scheme, c.authority ?? '', c.path ?? '', c.query ?? '', c.fragment ?? '');
  }

  static joinPath(base: Uri, ...segments: string[]): Uri {
    return base.with({ path: [base.path.replace(/\/+$/, ''), ...segments].join('/') });
  }

  get fsPath(): string {
    return this.path;
  }

  with(change: { scheme?: string; authority?: string; path?: string; query?: string; fragment?: string }): Uri {
    return new Uri(
      change.scheme ?? this.scheme,
      change.authority ?? this.authority,
      change.path ?? this.path,
      change.query ?? this.query,
      change.fragment ?? this.fragment,
    );
  }

  // Like VS Code, the string form is percent-encoded and Uri.parse decodes it back exactly.
  toString(): string {
    const auth = this.authority || this.scheme === 'file' ? `//${this.authority}` : '';
    const q = this.query ? `?${encodeMin(this.query, /[%#]/g)}` : '';
    const f = this.fragment ? `#${encodeMin(this.fragment, /%/g)}` : '';
    return `${this.scheme}:${auth}${encodeMin(this.path, /[%?# ]/g)}${q}${f}`;
  }

  toJSON(): unknown {
    return { scheme: this.scheme, path: this.path, query: this.query };
  }
}

export class Position {
  constructor(
    readonly line: number,
    readonly character: number,
  ) {}
}

export class Range {
  constructor(
    readonly start: Position,
    readonly end: Position,
  ) {}
}

export class Selection extends Range {
  get active(): Position {
    return this.end;
  }
}

export class Disposable {
  constructor(private readonly fn: () => void) {}
  static from(...items: Array<{ dispose(): unknown }>): Disposable {
    return new Disposable(() => items.forEach((i) => i.dispose()));
  }
  dispose(): void {
    this.fn();
  }
}

export type Event<T> = (listener: (e: T) => unknown) => Disposable;

export class EventEmitter<T> {
  private listeners = new Set<(e: T) => unknown>();
  readonly event: Event<T> = (listener) => {
    this.listeners.add(listener);
    return new Disposable(() => this.listeners.delete(listener));
  };
  fire(e: T): void {
    for (const l of [...this.listeners]) {
      l(e);
    }
  }
  dispose(): void {
    this.listeners.clear();
  }
}

export enum StatusBarAlignment {
  Left = 1,
  Right = 2,
}

export enum QuickPickItemKind {
  Separator = -1,
  Default = 0,
}

export class ThemeColor {
  constructor(readonly id: string) {}
}

export class TabInputTextDiff {
  constructor(
    readonly original: Uri,
    readonly modified: Uri,
  ) {}
}

export class TabInputText {
  constructor(readonly uri: Uri) {}
}

// ---------------------------------------------------------------------------------------------
// Documents and editors
// ---------------------------------------------------------------------------------------------

export class MockTextDocument {
  constructor(
    readonly uri: Uri,
    private readonly text: string,
  ) {}

  get lineCount(): number {
    return this.text.split('\n').length;
  }

  getText(range?: Range): string {
    if (!range) {
      return this.text;
    }
    const line = this.text.split('\n')[range.start.line] ?? '';
    return line.slice(range.start.character, range.end.character);
  }

  getWordRangeAtPosition(pos: Position): Range | undefined {
    const line = this.text.split('\n')[pos.line] ?? '';
    const re = /[A-Za-z_]\w*/g;
    let m: RegExpExecArray | null;
    while ((m = re.exec(line))) {
      if (pos.character >= m.index && pos.character <= m.index + m[0].length) {
        return new Range(new Position(pos.line, m.index), new Position(pos.line, m.index + m[0].length));
      }
    }
    return undefined;
  }
}

export function makeEditor(uri: Uri, text: string, line: number, character = 0): any {
  const pos = new Position(line, character);
  return { document: new MockTextDocument(uri, text), selection: new Selection(pos, pos) };
}

// ---------------------------------------------------------------------------------------------
// Recorders behind the namespaces
// ---------------------------------------------------------------------------------------------

export interface ShownMessage {
  level: 'info' | 'warning' | 'error';
  text: string;
  items: string[];
}

export class MockStatusBarItem {
  text = '';
  tooltip: unknown = '';
  command: unknown;
  name = '';
  backgroundColor: ThemeColor | undefined;
  visible = false;
  disposed = false;
  constructor(
    readonly id: string,
    readonly alignment: StatusBarAlignment,
    readonly priority: number,
  ) {}
  show(): void {
    this.visible = true;
  }
  hide(): void {
    this.visible = false;
  }
  dispose(): void {
    this.disposed = true;
  }
}

export enum LogLevel {
  Off = 0,
  Trace = 1,
  Debug = 2,
  Info = 3,
  Warning = 4,
  Error = 5,
}

export class MockOutputChannel {
  readonly lines: string[] = [];
  shown = 0;
  constructor(readonly name: string) {}
  private log(level: string, msg: string): void {
    this.lines.push(`[${level}] ${msg}`);
  }
  trace(m: string): void {
    this.log('trace', m);
  }
  debug(m: string): void {
    this.log('debug', m);
  }
  info(m: string): void {
    this.log('info', m);
  }
  warn(m: string): void {
    this.log('warn', m);
  }
  error(m: unknown): void {
    this.log('error', String(m));
  }
  append(m: string): void {
    this.log('raw', m);
  }
  appendLine(m: string): void {
    this.log('raw', m);
  }
  show(): void {
    this.shown++;
  }
  hide(): void {}
  clear(): void {}
  replace(): void {}
  dispose(): void {}
  logLevel: LogLevel = LogLevel.Info;
  readonly logLevelEmitter = new EventEmitter<LogLevel>();
  onDidChangeLogLevel = this.logLevelEmitter.event;
  /** As "Developer: Set Log Level" does. */
  setLogLevel(level: LogLevel): void {
    this.logLevel = level;
    this.logLevelEmitter.fire(level);
  }
}

/** Answers for the next prompts; a prompt with no queued answer is dismissed (undefined). */
type Answer = string | ((items: any[]) => any) | undefined;

interface Extension {
  id: string;
  isActive: boolean;
  exports: unknown;
  activate(): Promise<unknown>;
}

export interface SecretStorageMock {
  get(key: string): Promise<string | undefined>;
  store(key: string, value: string): Promise<void>;
  delete(key: string): Promise<void>;
  onDidChange: Event<{ key: string }>;
  values: Map<string, string>;
}

function makeSecrets(): SecretStorageMock {
  const values = new Map<string, string>();
  const emitter = new EventEmitter<{ key: string }>();
  return {
    values,
    get: async (k) => values.get(k),
    store: async (k, v) => {
      values.set(k, v);
      emitter.fire({ key: k });
    },
    delete: async (k) => {
      values.delete(k);
      emitter.fire({ key: k });
    },
    onDidChange: emitter.event,
  };
}

function freshState() {
  return {
    commands: new Map<string, (...args: any[]) => unknown>(),
    /** Calls of executeCommand for commands not registered here (vscode.diff, workbench.*). */
    executed: [] as Array<{ command: string; args: unknown[] }>,
    messages: [] as ShownMessage[],
    quickPicks: [] as Array<{ items: any[]; options: any }>,
    inputBoxes: [] as any[],
    answers: [] as Answer[],
    statusItems: [] as MockStatusBarItem[],
    outputChannels: [] as MockOutputChannel[],
    contentProviders: new Map<string, { provideTextDocumentContent(uri: Uri): unknown }>(),
    config: {} as Record<string, unknown>,
    configEmitter: new EventEmitter<{ affectsConfiguration(section: string): boolean }>(),
    files: new Map<string, string>(),
    extensions: new Map<string, Extension>(),
    tabs: [] as Array<{ input: unknown; label: string }>,
    closedTabs: [] as Array<{ input: unknown; label: string }>,
    activeTextEditor: undefined as any,
    workspaceFolders: undefined as Array<{ uri: Uri; name: string; index: number }> | undefined,
    clipboard: '',
  };
}

let state = freshState();

async function ask(items: any[]): Promise<any> {
  const answer = state.answers.shift();
  return typeof answer === 'function' ? answer(items) : answer;
}

export const __mock = {
  get state() {
    return state;
  },
  reset(): void {
    state = freshState();
  },
  /** Queues the answer to the next message, quick pick or input box. */
  answer(...answers: Answer[]): void {
    state.answers.push(...answers);
  },
  setConfig(values: Record<string, unknown>): void {
    state.config = { ...values };
  },
  /** Changes settings and fires onDidChangeConfiguration for the changed keys. */
  changeConfig(values: Record<string, unknown>): void {
    const keys = Object.keys(values);
    state.config = { ...state.config, ...values };
    state.configEmitter.fire({
      affectsConfiguration: (section: string) => keys.some((k) => `kernelopt.${k}` === section || `kernelopt.${k}`.startsWith(`${section}.`)),
    });
  },
  makeSecrets,
  makeContext(): any {
    return { subscriptions: [] as Array<{ dispose(): unknown }>, secrets: makeSecrets() };
  },
};

// ---------------------------------------------------------------------------------------------
// Namespaces
// ---------------------------------------------------------------------------------------------

export const commands = {
  registerCommand(id: string, fn: (...args: any[]) => unknown): Disposable {
    // VS Code throws on a duplicate id; so does the mock, so double registration fails tests.
    if (state.commands.has(id)) {
      throw new Error(`command '${id}' already exists`);
    }
    state.commands.set(id, fn);
    const commandsAtRegistration = state.commands;
    return new Disposable(() => commandsAtRegistration.delete(id));
  },
  async executeCommand(id: string, ...args: unknown[]): Promise<unknown> {
    const fn = state.commands.get(id);
    if (fn) {
      return fn(...args);
    }
    state.executed.push({ command: id, args });
    return undefined;
  },
  async getCommands(): Promise<string[]> {
    return [...state.commands.keys()];
  },
};

function showMessage(level: ShownMessage['level']) {
  return async (text: string, ...rest: unknown[]): Promise<string | undefined> => {
    const items = rest.filter((r): r is string => typeof r === 'string');
    state.messages.push({ level, text, items });
    return items.length > 0 ? ask(items) : undefined;
  };
}

export const env = {
  clipboard: {
    async readText(): Promise<string> {
      return state.clipboard;
    },
    async writeText(text: string): Promise<void> {
      state.clipboard = text;
    },
  },
};

export const window = {
  get activeTextEditor(): any {
    return state.activeTextEditor;
  },
  set activeTextEditor(e: any) {
    state.activeTextEditor = e;
  },
  createStatusBarItem(id: string, alignment: StatusBarAlignment, priority: number): MockStatusBarItem {
    const item = new MockStatusBarItem(id, alignment, priority);
    state.statusItems.push(item);
    return item;
  },
  createOutputChannel(name: string): MockOutputChannel {
    const channel = new MockOutputChannel(name);
    state.outputChannels.push(channel);
    return channel;
  },
  showInformationMessage: showMessage('info'),
  showWarningMessage: showMessage('warning'),
  showErrorMessage: showMessage('error'),
  async showQuickPick(items: any[] | Promise<any[]>, options?: any): Promise<any> {
    const list = await items;
    state.quickPicks.push({ items: list, options });
    return ask(list);
  },
  async showInputBox(options?: any): Promise<string | undefined> {
    state.inputBoxes.push(options);
    return ask([]);
  },
  tabGroups: {
    get all() {
      return [{ tabs: state.tabs }];
    },
    async close(tabs: any[]): Promise<boolean> {
      state.closedTabs.push(...tabs);
      state.tabs = state.tabs.filter((t) => !tabs.includes(t));
      return true;
    },
  },
};

export const workspace = {
  get workspaceFolders() {
    return state.workspaceFolders;
  },
  getConfiguration(section?: string) {
    const prefix = section ? `${section}.` : '';
    return {
      get<T>(key: string, fallback?: T): T | undefined {
        // Settings are stored without the section, as a user would write them under "kernelopt".
        const full = `${prefix}${key}`.replace(/^kernelopt\./, '');
        return full in state.config ? (state.config[full] as T) : fallback;
      },
      has: (key: string) => key in state.config,
    };
  },
  onDidChangeConfiguration(listener: (e: { affectsConfiguration(section: string): boolean }) => unknown): Disposable {
    return state.configEmitter.event(listener);
  },
  registerTextDocumentContentProvider(scheme: string, provider: { provideTextDocumentContent(uri: Uri): unknown }): Disposable {
    state.contentProviders.set(scheme, provider);
    return new Disposable(() => state.contentProviders.delete(scheme));
  },
  async openTextDocument(uri: Uri): Promise<MockTextDocument> {
    const text = state.files.get(uri.toString());
    if (text === undefined) {
      throw new Error(`mock: no file ${uri.toString()}`);
    }
    return new MockTextDocument(uri, text);
  },
  fs: {
    async readFile(uri: Uri): Promise<Uint8Array> {
      const text = state.files.get(uri.toString());
      if (text === undefined) {
        throw new Error(`mock: no file ${uri.toString()}`);
      }
      return new TextEncoder().encode(text);
    },
  },
};

export const extensions = {
  getExtension(id: string): Extension | undefined {
    return state.extensions.get(id);
  },
};
