// Owns the LanguageClient: starts kernelopt-lsp, rebuilds it when the launch inputs change, and
// forwards server commands. A new client per start, because the executable and its environment
// (interpreter, API key) are fixed when a LanguageClient is constructed.
import * as vscode from 'vscode';
import {
  ClientCapabilities,
  ExecuteCommandSignature,
  FeatureState,
  LanguageClient,
  LanguageClientOptions,
  State,
  StaticFeature,
} from 'vscode-languageclient/node';
import { CLIENT_ID, CLIENT_NAME, ClientCommand, CONFIG_SECTION, JOB_STATUS_NOTIFICATION, ServerCommand, ServerCommandId } from './ids';
import { buildServerExecutable, describeLaunch, documentSelector, resolveInterpreter } from './serverOptions';
import { initializationOptions, KernelOptSettings } from './settings';
import { ServerState } from './status';
import { TraceChannel } from './trace';

/** Where the launch inputs come from; injected so the manager is testable. */
export interface LaunchInputs {
  settings(): KernelOptSettings;
  pythonInterpreter(): Promise<string | undefined>;
  apiKey(): Promise<string | undefined>;
  cwd(): string | undefined;
}

/**
 * `kernelopt.server.copyConfig` runs on the server, which answers with the text; the code action
 * that VS Code runs goes through this middleware, which puts the text on the clipboard. (The
 * server shows the text to clients without this: see docs/lsp-contract.md.)
 */
export async function executeCommandMiddleware(command: string, args: any[], next: ExecuteCommandSignature): Promise<unknown> {
  const result: unknown = await next(command, args);
  if (command === ServerCommand.copyConfig && typeof result === 'object' && result !== null) {
    const { text, title, verified } = result as { text?: unknown; title?: unknown; verified?: unknown };
    if (typeof text === 'string' && text !== '') {
      await vscode.env.clipboard.writeText(text);
      const what = typeof title === 'string' && title ? title : 'the configuration change';
      void vscode.window.showInformationMessage(
        `KernelOPT: copied the torch.compile call (${what}${verified === true ? ', verified' : ', not verified'}) to the clipboard.`,
      );
    }
  }
  return result;
}

export function clientOptions(
  settings: KernelOptSettings,
  output: vscode.LogOutputChannel,
  traceOutput: vscode.LogOutputChannel = output,
): LanguageClientOptions {
  return {
    documentSelector: documentSelector(settings.dumpFolders, settings.userKernels),
    outputChannel: output,
    // Follows kernelopt.trace.server (see trace.ts) and writes into the same output.
    traceOutputChannel: traceOutput,
    initializationOptions: initializationOptions(settings),
    // Pushes `workspace/didChangeConfiguration` for kernelopt.* besides the server's own pulls.
    synchronize: { configurationSection: CONFIG_SECTION },
    // Hovers may link to our commands (e.g. "Optimize"); only those, nothing else, are trusted.
    markdown: {
      isTrusted: { enabledCommands: [...Object.values(ServerCommand), ...Object.values(ClientCommand)] },
      supportThemeIcons: true,
    },
    middleware: { executeCommand: executeCommandMiddleware },
  };
}

/**
 * Tells the server what this client does itself: it turns kernelopt/jobStatus into its own messages
 * and copies copyConfig's text to the clipboard. The server otherwise goes by the client's name, and
 * code-server (VS Code in a browser) calls itself "code-server": the server then showed every job's
 * end a second time.
 */
export const KERNELOPT_CAPABILITIES: StaticFeature = {
  fillClientCapabilities(capabilities: ClientCapabilities): void {
    const experimental = (capabilities.experimental ?? {}) as Record<string, unknown>;
    capabilities.experimental = { ...experimental, kernelopt: { jobStatus: true, clipboard: true } };
  },
  initialize(): void {},
  getState(): FeatureState {
    return { kind: 'static' };
  },
  clear(): void {},
};

export class ServerManager implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private queue: Promise<void> = Promise.resolve();
  private readonly stateEmitter = new vscode.EventEmitter<ServerState>();
  readonly onDidChangeState = this.stateEmitter.event;
  private interpreter: string | undefined;
  private readonly traceOutput: TraceChannel;

  constructor(
    private readonly output: vscode.LogOutputChannel,
    private readonly inputs: LaunchInputs,
    private readonly onJobStatus: (raw: unknown) => void,
  ) {
    this.traceOutput = new TraceChannel(output);
  }

  /** The interpreter the running server was launched with. */
  get launchedInterpreter(): string | undefined {
    return this.interpreter;
  }

  start(): Promise<void> {
    return this.enqueue(() => this.doStart());
  }

  restart(): Promise<void> {
    return this.enqueue(async () => {
      await this.doStop();
      await this.doStart();
    });
  }

  stop(): Promise<void> {
    return this.enqueue(() => this.doStop());
  }

  /** Sends `workspace/executeCommand` directly, after any pending (re)start has settled. */
  async executeCommand(command: ServerCommandId, arg: object): Promise<unknown> {
    await this.queue;
    const client = this.client;
    if (!client || !client.isRunning()) {
      throw new Error('the server is not running (see KernelOPT: Show Output)');
    }
    return client.sendRequest('workspace/executeCommand', { command, arguments: [arg] });
  }

  // Start/stop/restart run one at a time: a settings change and a secret change arriving together
  // must not build two clients that both register the server's commands.
  private enqueue(step: () => Promise<void>): Promise<void> {
    const next = this.queue.then(step, step);
    this.queue = next.catch(() => undefined);
    return next;
  }

  private async doStart(): Promise<void> {
    const settings = this.inputs.settings();
    const fromPython = settings.interpreter ? undefined : await this.inputs.pythonInterpreter();
    const exe = buildServerExecutable(settings, fromPython, await this.inputs.apiKey(), this.inputs.cwd());
    const interpreter = resolveInterpreter(settings.interpreter, fromPython);
    this.interpreter = exe.command;
    this.output.info(describeLaunch(exe, interpreter.source, settings.apiKeyEnv));

    const client = new LanguageClient(CLIENT_ID, CLIENT_NAME, exe, clientOptions(settings, this.output, this.traceOutput));
    client.registerFeature(KERNELOPT_CAPABILITIES);
    this.client = client;
    client.onDidChangeState((e) => {
      if (this.client === client) {
        this.stateEmitter.fire(e.newState === State.Running ? 'running' : e.newState === State.Starting ? 'starting' : 'stopped');
      }
    });
    client.onNotification(JOB_STATUS_NOTIFICATION, (params: unknown) => this.onJobStatus(params));
    this.stateEmitter.fire('starting');
    try {
      await client.start();
      this.stateEmitter.fire('running');
    } catch (e) {
      this.output.error(`kernelopt-lsp did not start: ${(e as Error)?.message ?? String(e)}`);
      this.stateEmitter.fire('failed');
      void this.explainStartFailure(exe.command);
    }
  }

  private async doStop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    if (client) {
      try {
        // dispose() also unregisters the server's commands, so the next client can register them.
        await client.dispose(5000);
      } catch (e) {
        this.output.warn(`stopping kernelopt-lsp: ${(e as Error)?.message ?? String(e)}`);
      }
      this.stateEmitter.fire('stopped');
    }
  }

  private async explainStartFailure(interpreter: string): Promise<void> {
    const choice = await vscode.window.showErrorMessage(
      `KernelOPT: the language server did not start with "${interpreter}". Install the Python side ` +
        '(`pip install -e .` in the KernelOPT repository provides kernelopt-lsp) or set kernelopt.interpreter.',
      'Show Output',
      'Open Settings',
    );
    if (choice === 'Show Output') {
      this.output.show(true);
    } else if (choice === 'Open Settings') {
      await vscode.commands.executeCommand('workbench.action.openSettings', 'kernelopt.interpreter');
    }
  }

  async dispose(): Promise<void> {
    await this.stop();
    this.stateEmitter.dispose();
    this.traceOutput.dispose();
  }
}
