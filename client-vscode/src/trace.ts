// The channel the LanguageClient writes its LSP trace to. vscode-languageclient (10+) traces only
// while its trace channel's log level is Trace, whatever `kernelopt.trace.server` says, and writes
// each message at trace level, which the output hides at its default level (Info). So the setting
// alone showed nothing. This channel makes the setting decide: with `messages` or `verbose` it reports
// the Trace level to the client and writes the messages at a level the output shows.
import * as vscode from 'vscode';
import { CONFIG_SECTION } from './ids';

export type TraceSetting = 'off' | 'messages' | 'verbose';
export const TRACE_SETTING_KEY = 'trace.server';

export function traceSetting(value: unknown): TraceSetting {
  return value === 'messages' || value === 'verbose' ? value : 'off';
}

export class TraceChannel implements vscode.LogOutputChannel {
  private readonly levelEmitter = new vscode.EventEmitter<vscode.LogLevel>();
  readonly onDidChangeLogLevel = this.levelEmitter.event;
  private readonly subscriptions: vscode.Disposable[];

  constructor(
    private readonly output: vscode.LogOutputChannel,
    private readonly setting: () => TraceSetting = () =>
      traceSetting(vscode.workspace.getConfiguration(CONFIG_SECTION).get<unknown>(TRACE_SETTING_KEY)),
  ) {
    this.subscriptions = [
      // The client re-reads the level only when this event fires: a changed setting must fire it.
      vscode.workspace.onDidChangeConfiguration((e) => {
        if (e.affectsConfiguration(`${CONFIG_SECTION}.${TRACE_SETTING_KEY}`)) {
          this.levelEmitter.fire(this.logLevel);
        }
      }),
      output.onDidChangeLogLevel(() => this.levelEmitter.fire(this.logLevel)),
      this.levelEmitter,
    ];
  }

  get name(): string {
    return this.output.name;
  }

  /** Trace while the setting asks for a trace; otherwise the output's own level (Developer: Set Log Level). */
  get logLevel(): vscode.LogLevel {
    return this.setting() !== 'off' ? vscode.LogLevel.Trace : this.output.logLevel;
  }

  trace(message: string, ...args: unknown[]): void {
    if (this.output.logLevel === vscode.LogLevel.Trace) {
      this.output.trace(message, ...args);
    } else {
      this.output.info(message, ...args);
    }
  }

  debug(message: string, ...args: unknown[]): void {
    this.output.debug(message, ...args);
  }

  info(message: string, ...args: unknown[]): void {
    this.output.info(message, ...args);
  }

  warn(message: string, ...args: unknown[]): void {
    this.output.warn(message, ...args);
  }

  error(error: string | Error, ...args: unknown[]): void {
    this.output.error(error, ...args);
  }

  append(value: string): void {
    this.output.append(value);
  }

  appendLine(value: string): void {
    this.output.appendLine(value);
  }

  replace(value: string): void {
    this.output.replace(value);
  }

  clear(): void {
    this.output.clear();
  }

  show(preserveFocus?: boolean): void;
  show(column?: vscode.ViewColumn, preserveFocus?: boolean): void;
  show(first?: boolean | vscode.ViewColumn, preserveFocus?: boolean): void {
    if (typeof first === 'boolean' || first === undefined) {
      this.output.show(first);
    } else {
      this.output.show(first, preserveFocus);
    }
  }

  hide(): void {
    this.output.hide();
  }

  /** Disposes the listeners only: the output belongs to the extension. */
  dispose(): void {
    for (const s of this.subscriptions) {
      s.dispose();
    }
  }
}
