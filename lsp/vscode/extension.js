// Minimal VS Code client for `repomem serve` (stdio). Inline completion is a proposed feature of
// vscode-languageclient 9, so it is switched on with registerProposedFeatures().
const vscode = require("vscode");
const { LanguageClient } = require("vscode-languageclient/node");
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

async function activate(context) {
  const command = userOrWorkspaceValue(vscode.workspace.getConfiguration("repomem"), "command") || "repomem";
  client = new LanguageClient("repomem", "repomem",
    { command, args: ["serve"] },
    {
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
      synchronize: { fileEvents: vscode.workspace.createFileSystemWatcher("**/*") },
    });
  client.registerProposedFeatures();
  await client.start();

  context.subscriptions.push(vscode.workspace.onDidChangeConfiguration((event) => {
    if (event.affectsConfiguration("repomem")) {
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
    const result = await client.sendRequest("workspace/executeCommand", {
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
  // Accepting an inline completion runs the item's command `repomem.didAccept` on the server,
  // which logs it (with its fragments) in the repository's .repomem/feedback.jsonl.
}

function deactivate() {
  // stop() rejects for a client that is not running ("Client is not running and can't be
  // stopped"): one whose start failed (no `repomem` on PATH) or that crashed too often.
  return client && client.needsStop() ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
