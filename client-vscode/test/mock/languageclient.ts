// Fake `vscode-languageclient/node`: records how the client was built and what it was asked to do,
// without spawning the Python server.
import { Disposable, EventEmitter } from './vscode';

export enum State {
  Stopped = 1,
  Running = 2,
  Starting = 3,
}

export interface SentRequest {
  method: string;
  params: any;
}

export class LanguageClient {
  static instances: LanguageClient[] = [];
  /** When set, start() rejects with it (a server that fails to launch). */
  static startError: Error | undefined;
  /** Answers executeCommand requests, by server command id. */
  static responses: Record<string, unknown> = {};

  readonly requests: SentRequest[] = [];
  readonly handlers = new Map<string, (params: unknown) => void>();
  running = false;
  disposed = false;
  private readonly stateEmitter = new EventEmitter<{ oldState: State; newState: State }>();
  readonly onDidChangeState = this.stateEmitter.event;

  constructor(
    readonly id: string,
    readonly name: string,
    readonly serverOptions: any,
    readonly clientOptions: any,
  ) {
    LanguageClient.instances.push(this);
  }

  readonly features: any[] = [];
  registerFeature(feature: any): void {
    this.features.push(feature);
  }

  static reset(): void {
    LanguageClient.instances = [];
    LanguageClient.startError = undefined;
    LanguageClient.responses = {};
  }

  static get last(): LanguageClient {
    const c = LanguageClient.instances[LanguageClient.instances.length - 1];
    if (!c) {
      throw new Error('no LanguageClient was created');
    }
    return c;
  }

  async start(): Promise<void> {
    this.stateEmitter.fire({ oldState: State.Stopped, newState: State.Starting });
    if (LanguageClient.startError) {
      this.stateEmitter.fire({ oldState: State.Starting, newState: State.Stopped });
      throw LanguageClient.startError;
    }
    this.running = true;
    this.stateEmitter.fire({ oldState: State.Starting, newState: State.Running });
  }

  async stop(): Promise<void> {
    this.running = false;
  }

  async dispose(): Promise<void> {
    this.running = false;
    this.disposed = true;
  }

  isRunning(): boolean {
    return this.running;
  }

  onNotification(method: string, handler: (params: unknown) => void): Disposable {
    this.handlers.set(method, handler);
    return new Disposable(() => this.handlers.delete(method));
  }

  /** Test helper: the server sends a notification. */
  notify(method: string, params: unknown): void {
    const h = this.handlers.get(method);
    if (!h) {
      throw new Error(`no handler for ${method}`);
    }
    h(params);
  }

  async sendRequest(method: string, params: any): Promise<unknown> {
    this.requests.push({ method, params });
    if (method === 'workspace/executeCommand') {
      return LanguageClient.responses[params.command];
    }
    return undefined;
  }

  /** The executeCommand requests sent, as `{command, arg}`. */
  get executed(): Array<{ command: string; arg: any }> {
    return this.requests
      .filter((r) => r.method === 'workspace/executeCommand')
      .map((r) => ({ command: r.params.command, arg: r.params.arguments?.[0] }));
  }
}
