// Minimal VS Code client for `repomem serve` (stdio). Inline completion is a proposed feature of
// vscode-languageclient 9, so it is switched on with registerProposedFeatures().
const vscode = require("vscode");
const { LanguageClient, State } = require("vscode-languageclient/node");
const { isSecretDocument } = require("./secret_files");

// repomem's own index folder and git's: the server reads neither as source, and every index save
// would otherwise come back as a burst of watched-file events.
const UNWATCHED = /\/(\.repomem|\.git)\//;
const SETTING_KEYS = ["strategy", "alpha", "topK", "maxNewTokens", "maxLines", "maxPromptTokens", "debounceMs", "endpoint", "model"];
// Where the code goes and what runs are the user's own settings only ("scope": "machine" in
// package.json): a cloned repository's .vscode/settings.json must not send the code, and the
// API key, to a server it names, load a model file of its choosing or name the program started.
const USER_ONLY_KEYS = new Set(["endpoint", "model", "command"]);
let client;
let clientCommand; // the command `client` runs
let startFailure; // why its start failed, for the commands to say (undefined: it started)
let outputChannel; // one "repomem" channel for every client this window starts
let restarting = Promise.resolve(); // restarts one after another: a client cannot stop while starting
let explainChannel; // one channel for every explain: createOutputChannel makes a new one per call

function userOrWorkspaceValue(config, key) {
  const set = config.inspect(key);
  if (!set) return undefined;
  return USER_ONLY_KEYS.has(key) ? set.globalValue : (set.workspaceFolderValue ?? set.workspaceValue ?? set.globalValue);
}

// Only the settings the user set (user, workspace or folder) are sent: the server's own defaults
// apply to the rest, and they depend on the model (a 1,024-token prompt with the embedded model,
// 2,048 with a server), which package.json's static defaults cannot say.
function settings() {
  const config = vscode.workspace.getConfiguration("repomem");
  const out = {};
  for (const key of SETTING_KEYS) {
    const value = userOrWorkspaceValue(config, key);
    if (value !== undefined && value !== null) out[key] = value;
  }
  return { repomem: out };
}

function newClient(command) {
  return new LanguageClient("repomem", "repomem",
    { command, args: ["serve"] },
    {
      outputChannel,
      documentSelector: [{ scheme: "file" }],
      // A selector cannot exclude names, so secret files (.env, keys, secrets.*) are held back here:
      // the server never sees their text, not even when they are open.
      middleware: {
        didOpen: (document, next) => (isSecretDocument(document) ? Promise.resolve() : next(document)),
        didChange: (event, next) => (isSecretDocument(event.document) ? Promise.resolve() : next(event)),
        didSave: (document, next) => (isSecretDocument(document) ? Promise.resolve() : next(document)),
        didClose: (document, next) => (isSecretDocument(document) ? Promise.resolve() : next(document)),
        // vscode-languageclient 9 sends VS Code's context as it is (trigger kinds 0/1, LSP's 1/2; a
        // Range where LSP has {start, end}): sent in LSP's shape here. The server reads neither.
        provideInlineCompletionItems: (document, position, context, token, next) =>
          (isSecretDocument(document) ? null
            : next(document, position, { triggerKind: context.triggerKind + 1 }, token)),
        // The ghost text is the one place a completion shows in VS Code: the same answer in the
        // suggest widget would only cover it (the server's list is for clients without ghost text).
        provideCompletionItem: () => null,
        workspace: {
          didChangeWatchedFile: (event, next) => (UNWATCHED.test(event.uri) ? Promise.resolve() : next(event)),
        },
      },
      // A function, read at each initialize: after a crash the client restarts the server with
      // these, and a value taken at activation would bring back settings the user has changed since
      // (an `endpoint` removed would send the code to that server again).
      initializationOptions: settings,
      // No `synchronize.fileEvents`: the server registers its own watcher ("**/*") once it has a
      // workspace, and a second one here sent every create/change/delete to it twice.
    });
}

// (Re)starts the server with the command set now. A start that fails (no such executable) leaves
// the commands in place, saying why, and a later restart (the setting fixed, `repomem: Restart the
// server`) starts a new client: vscode-languageclient cannot start again a client whose start failed.
function restart() {
  restarting = restarting.then(async () => {
    const command = userOrWorkspaceValue(vscode.workspace.getConfiguration("repomem"), "command") || "repomem";
    if (client && client.needsStop()) await client.stop().catch(() => undefined);
    client = newClient(command);
    clientCommand = command;
    client.registerProposedFeatures();
    try {
      await client.start();
      startFailure = undefined;
    } catch (error) {
      // vscode-languageclient has shown its own "couldn't create connection" with the details.
      startFailure = `repomem could not start \`${command} serve\` (${error && error.message}): set `
        + "repomem.command in your user settings to the repomem executable, or install repomem, then run "
        + "\"repomem: Restart the server\".";
    }
  });
  return restarting;
}

// The server's client when it runs, else undefined after telling the user why it does not.
function runningClient() {
  if (client && client.state !== State.Stopped) return client; // running, or starting: requests wait
  vscode.window.showErrorMessage(startFailure
    || "repomem's server has stopped (see Output: repomem); run \"repomem: Restart the server\".");
  return undefined;
}

async function activate(context) {
  outputChannel = vscode.window.createOutputChannel("repomem");
  context.subscriptions.push(outputChannel);
  // The commands and the settings' listener come first: a failed start must not leave them unregistered.
  context.subscriptions.push(vscode.commands.registerCommand("repomem.restart", restart));
  context.subscriptions.push(vscode.workspace.onDidChangeConfiguration((event) => {
    const command = userOrWorkspaceValue(vscode.workspace.getConfiguration("repomem"), "command") || "repomem";
    if (event.affectsConfiguration("repomem.command") && command !== clientCommand) {
      restart(); // the server another program is: a new one, which reads the settings at its start
    } else if (event.affectsConfiguration("repomem") && client) {
      // Under "repomem": the server takes it as every setting in force, so an empty one (the
      // user's last setting removed) unsets them all rather than reading as another server's.
      // settings() is already that object: wrapped once more, the server's "nothing changed" check
      // never held, and every change (`repomem.command`'s too) stopped its pending completions.
      // A client stopped for good rejects it; its next start reads the settings anyway.
      client.sendNotification("workspace/didChangeConfiguration", { settings: settings() }).catch(() => undefined);
    }
  }));
  context.subscriptions.push(vscode.commands.registerCommand("repomem.explainAtCursor", async () => {
    const editor = vscode.window.activeTextEditor;
    if (!editor) return;
    const running = runningClient();
    if (!running) return;
    const result = await running.sendRequest("workspace/executeCommand", {
      command: "repomem.explain",
      arguments: [{ textDocument: { uri: editor.document.uri.toString() },
                    position: { line: editor.selection.active.line, character: editor.selection.active.character } }],
    });
    if (!explainChannel) {
      explainChannel = vscode.window.createOutputChannel("repomem explain");
      context.subscriptions.push(explainChannel);
    }
    const channel = explainChannel;
    channel.clear();
    channel.appendLine(JSON.stringify(result, null, 2));
    channel.show(true);
  }));
  await restart();
  // Accepting an inline completion runs the item's command `repomem.didAccept` on the server,
  // which logs it (with its fragments) in the repository's .repomem/feedback.jsonl.
}

async function deactivate() {
  // stop() rejects for a client that is not running ("Client is not running and can't be
  // stopped"): one whose start failed (no `repomem` on PATH) or that crashed too often.
  await restarting;
  return client && client.needsStop() ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
