// The provider API key, kept in VS Code's SecretStorage (OS keychain) and never in settings or logs.
import * as vscode from 'vscode';
import { SECRET_API_KEY } from './ids';

export class ApiKeyStore {
  constructor(private readonly secrets: vscode.SecretStorage) {}

  async get(): Promise<string | undefined> {
    const key = await this.secrets.get(SECRET_API_KEY);
    return key ? key : undefined;
  }

  async set(key: string): Promise<void> {
    await this.secrets.store(SECRET_API_KEY, key);
  }

  async clear(): Promise<void> {
    await this.secrets.delete(SECRET_API_KEY);
  }

  /** Fires when the stored key changes, also from another window of the same profile. */
  onDidChange(listener: () => void): vscode.Disposable {
    return this.secrets.onDidChange((e) => {
      if (e.key === SECRET_API_KEY) {
        listener();
      }
    });
  }
}

export type ApiKeyPromptResult = 'stored' | 'cleared' | 'cancelled';

/** The Set API Key command: a password box; an empty entry removes the stored key. */
export async function promptForApiKey(store: ApiKeyStore, envName: string): Promise<ApiKeyPromptResult> {
  const hasKey = (await store.get()) !== undefined;
  const value = await vscode.window.showInputBox({
    title: 'KernelOPT: Set API Key',
    prompt: `Stored in VS Code's secret storage and passed to the server as $${envName}.${hasKey ? ' Leave empty to remove the stored key.' : ''}`,
    password: true,
    ignoreFocusOut: true,
    placeHolder: hasKey ? '(a key is stored)' : 'sk-ant-...',
  });
  if (value === undefined) {
    return 'cancelled';
  }
  const key = value.trim();
  if (key) {
    await store.set(key);
    void vscode.window.showInformationMessage('KernelOPT: API key stored; the server restarts to pick it up.');
    return 'stored';
  }
  if (hasKey) {
    await store.clear();
    void vscode.window.showInformationMessage('KernelOPT: stored API key removed.');
    return 'cleared';
  }
  return 'cancelled';
}
