// kernelopt.trace.server alone must make the LanguageClient trace, into the KernelOPT output.
import * as assert from 'assert';
import { activate } from '../src/extension';
import { TraceChannel, traceSetting } from '../src/trace';
import { flush } from './helpers';
import { LanguageClient } from './mock/languageclient';
import { __mock, LogLevel, MockOutputChannel, Uri } from './mock/vscode';

describe('trace channel', () => {
  beforeEach(() => {
    __mock.reset();
    LanguageClient.reset();
  });

  it('reads only the three values of the setting', () => {
    assert.strictEqual(traceSetting('messages'), 'messages');
    assert.strictEqual(traceSetting('verbose'), 'verbose');
    for (const bad of ['off', 'Messages', undefined, 3, null]) {
      assert.strictEqual(traceSetting(bad), 'off', String(bad));
    }
  });

  it('reports the Trace level while the setting asks for a trace, else the output level', () => {
    const output = new MockOutputChannel('KernelOPT');
    __mock.setConfig({ 'trace.server': 'off' });
    const channel = new TraceChannel(output as any);
    assert.strictEqual(channel.logLevel, LogLevel.Info);
    __mock.setConfig({ 'trace.server': 'messages' });
    assert.strictEqual(channel.logLevel, LogLevel.Trace);
    output.setLogLevel(LogLevel.Trace);
    __mock.setConfig({ 'trace.server': 'off' });
    assert.strictEqual(channel.logLevel, LogLevel.Trace, 'Developer: Set Log Level still traces');
  });

  it('writes trace messages where the output shows them at its default level', () => {
    const output = new MockOutputChannel('KernelOPT');
    const channel = new TraceChannel(output as any, () => 'messages');
    channel.trace("Sending request 'initialize - (0)'.");
    assert.deepStrictEqual(output.lines, ["[info] Sending request 'initialize - (0)'."]);
    output.setLogLevel(LogLevel.Trace);
    channel.trace('Received response');
    assert.strictEqual(output.lines[1], '[trace] Received response');
  });

  it('tells the client when the setting or the output level changes', () => {
    const output = new MockOutputChannel('KernelOPT');
    __mock.setConfig({ 'trace.server': 'off' });
    const channel = new TraceChannel(output as any);
    const seen: LogLevel[] = [];
    channel.onDidChangeLogLevel((level) => seen.push(level));
    __mock.changeConfig({ 'trace.server': 'verbose' });
    __mock.changeConfig({ provider: 'offline' });
    __mock.changeConfig({ 'trace.server': 'off' });
    output.setLogLevel(LogLevel.Debug);
    assert.deepStrictEqual(seen, [LogLevel.Trace, LogLevel.Info, LogLevel.Debug]);
    channel.dispose();
    __mock.changeConfig({ 'trace.server': 'messages' });
    assert.strictEqual(seen.length, 3, 'no events after dispose');
  });

  it('is the trace channel the extension gives the LanguageClient', async () => {
    __mock.state.workspaceFolders = [{ uri: Uri.file('/ws'), name: 'ws', index: 0 }];
    __mock.setConfig({ 'trace.server': 'messages' });
    await activate(__mock.makeContext());
    await flush();
    const options = LanguageClient.last.clientOptions;
    assert.ok(options.traceOutputChannel instanceof TraceChannel);
    assert.strictEqual(options.traceOutputChannel.logLevel, LogLevel.Trace);
    options.traceOutputChannel.trace('[Trace] Sending notification');
    assert.ok(__mock.state.outputChannels[0].lines.includes('[info] [Trace] Sending notification'));
  });
});
