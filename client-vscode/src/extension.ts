// Entry point: wires the modules together. Logic lives in the modules; this file only connects them.
import * as vscode from 'vscode';
import { registerCommands } from './commands';
import { DiffContentProvider } from './diff';
import { CLIENT_NAME, CONFIG_SECTION, DIFF_SCHEME } from './ids';
import { JobTracker } from './jobs';
import { jobStatusHandler } from './notifications';
import { activePythonInterpreter, onPythonInterpreterChanged } from './python';
import { ApiKeyStore } from './secrets';
import { ServerManager } from './server';
import { resolveInterpreter } from './serverOptions';
import { readSettings, RESTART_KEYS } from './settings';
import { StatusBar } from './status';

let manager: ServerManager | undefined;

function settings() {
  return readSettings(vscode.workspace.getConfiguration(CONFIG_SECTION));
}

function pythonInterpreter(): Promise<string | undefined> {
  return activePythonInterpreter(vscode.workspace.workspaceFolders?.[0]?.uri);
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  // One log channel for the whole session, reused by every client across restarts.
  const output = vscode.window.createOutputChannel(CLIENT_NAME, { log: true });
  const tracker = new JobTracker();
  const status = new StatusBar(tracker);
  const apiKeys = new ApiKeyStore(context.secrets);
  const diffs = new DiffContentProvider();

  const server = new ServerManager(
    output,
    {
      settings,
      pythonInterpreter,
      apiKey: () => apiKeys.get(),
      cwd: () => vscode.workspace.workspaceFolders?.[0]?.uri.fsPath,
    },
    jobStatusHandler({ tracker, output }),
  );
  manager = server;

  context.subscriptions.push(
    // The server first: it still logs to the channel while stopping.
    server,
    status,
    server.onDidChangeState((state) => {
      status.setServerState(state);
      if (state !== 'running' && state !== 'starting') {
        // The server's jobs died with it; finished results stay reviewable.
        tracker.dropActive();
      }
    }),
    vscode.workspace.registerTextDocumentContentProvider(DIFF_SCHEME, diffs),
    ...registerCommands({ server, tracker, diffs, output, apiKeys, apiKeyEnv: () => settings().apiKeyEnv }),
    // The launch command, its environment and the document selector are fixed per client.
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (RESTART_KEYS.some((k) => e.affectsConfiguration(`${CONFIG_SECTION}.${k}`))) {
        output.info('Launch settings changed; restarting the server.');
        void server.restart();
      }
    }),
    apiKeys.onDidChange(() => {
      output.info('API key changed; restarting the server.');
      void server.restart();
    }),
    output,
  );

  // Not awaited: activation must not wait for Python to start; failures are reported by the manager.
  void server.start();

  // Subscribed after the start so a slow Python extension activation does not delay the server.
  void onPythonInterpreterChanged(async () => {
    // Only matters while the interpreter comes from the Python extension, and only if it really changed.
    if (!settings().interpreter && resolveInterpreter('', await pythonInterpreter()).path !== server.launchedInterpreter) {
      output.info('Python environment changed; restarting the server.');
      void server.restart();
    }
  }).then((sub) => sub && context.subscriptions.push(sub));
}

export async function deactivate(): Promise<void> {
  await manager?.stop();
  manager = undefined;
}
