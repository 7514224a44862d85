// Minimal VS Code client for `repomem serve` (stdio). Inline completion is a proposed feature of
// vscode-languageclient 9, so it is switched on with registerProposedFeatures().
//
// A server indexes one repository, the workspace folder it is given, so a multi-root workspace gets
// one server per folder, as VS Code's multi-server sample does: started when the folder's first
// source file opens, stopped when the folder leaves the workspace. Each runs its own model.
const vscode = require("vscode");
const { LanguageClient, State } = require("vscode-languageclient/node");
const { isSecretDocument } = require("./secret_files");

// The languages repomem indexes, read from the events that activate the extension: a folder's
// server starts with its first such file, not with a JSON or Markdown file another extension opens.
const SOURCE_LANGUAGES = new Set(require("./package.json").activationEvents
  .filter((event) => event.startsWith("onLanguage:")).map((event) => event.slice("onLanguage:".length)));
// repomem's own index folder and git's: the server reads neither as source, and every index save
// would otherwise come back as a burst of watched-file events.
const UNWATCHED = /\/(\.repomem|\.git)\//;
// The server's settings are the `repomem.*` settings package.json declares, less the client's own:
// the program it starts and vscode-languageclient's message trace, which the server is never sent.
const SETTINGS = require("./package.json").contributes.configuration.properties;
const CLIENT_OWN_KEYS = new Set(["command", "trace.server"]);
const SETTING_KEYS = Object.keys(SETTINGS).map((key) => key.slice("repomem.".length))
  .filter((key) => !CLIENT_OWN_KEYS.has(key));
// Where the code goes and what runs are the user's own settings only ("scope": "machine" in
// package.json, as the server's own rules say "not a repository"): a cloned repository's
// .vscode/settings.json must not send the code, and the API key, to a server it names, load a
// model file of its choosing, write the feedback log where it likes or name the program started.
const USER_ONLY_KEYS = new Set(Object.keys(SETTINGS).filter((key) => SETTINGS[key].scope === "machine")
  .map((key) => key.slice("repomem.".length)));
const NO_FOLDER = ""; // the key of the one server of a window opened on files, with no folder
// Each server by its folder's uri (NO_FOLDER): { folder, command, client, failure }, where
// `failure` says why its start failed, for the commands to say (undefined: it started).
const servers = new Map();
let queue = Promise.resolve(); // starts and stops one after another: a client cannot stop while starting
let outputChannel; // one "repomem" channel for every client this window starts
let explainChannel; // one channel for every explain: createOutputChannel makes a new one per call
const saidOutside = new Set(); // files outside every folder, said once each in the output channel

function userOrWorkspaceValue(config, key) {
  const set = config.inspect(key);
  if (!set) return undefined;
  return USER_ONLY_KEYS.has(key) ? set.globalValue : (set.workspaceFolderValue ?? set.workspaceValue ?? set.globalValue);
}

function configuredCommand() {
  return userOrWorkspaceValue(vscode.workspace.getConfiguration("repomem"), "command") || "repomem";
}

// Only the settings the user set (user, workspace or `folder`'s own) are sent: the server's own
// defaults apply to the rest, and they depend on the model (a 1,024-token prompt with the embedded
// model, 2,048 with a server), which package.json's static defaults cannot say.
function settings(folder) {
  const config = vscode.workspace.getConfiguration("repomem", folder && folder.uri);
  const out = {};
  for (const key of SETTING_KEYS) {
    const value = userOrWorkspaceValue(config, key);
    if (value !== undefined && value !== null) out[key] = value;
  }
  return { repomem: out };
}

const withSlash = (uri) => (uri.endsWith("/") ? uri : `${uri}/`);
const hasFolders = () => (vscode.workspace.workspaceFolders || []).length > 0;

// The folder whose server serves `uri`: the outermost workspace folder holding it. A folder nested
// in another has its files in the outer one's index already, and a second server would index them again.
function outermostFolder(uri) {
  const folder = vscode.workspace.getWorkspaceFolder(uri);
  if (!folder) return undefined;
  const inner = withSlash(folder.uri.toString());
  return vscode.workspace.workspaceFolders
    .filter((candidate) => inner.startsWith(withSlash(candidate.uri.toString())))
    .reduce((outer, candidate) => (candidate.uri.toString().length < outer.uri.toString().length ? candidate : outer),
            folder);
}

// `folder`'s client (undefined: a window without folders, whose client takes every file).
function newClient(command, folder) {
  const folderPrefix = folder && withSlash(folder.uri.toString());
  return new LanguageClient("repomem", folder ? `repomem (${folder.name})` : "repomem",
    { command, args: ["serve"] },
    {
      outputChannel,
      // The server is given this folder alone (vscode-languageclient would give every folder, and
      // the server indexes the first), and gets the documents below it, a nested folder's included.
      // A pattern relative to the folder, not a glob spelled from its path: a path's `[`, `]`, `{`,
      // `}`, `*` or `?` are glob syntax there (`/w/[draft]/**/*` matched `/w/d/` and nothing of
      // `/w/[draft]/`), as are Windows' backslashes. vscode-languageclient 9 hands the selector's
      // pattern to VS Code as it is, and VS Code matches a RelativePattern below its base.
      workspaceFolder: folder,
      documentSelector: [folder ? { scheme: "file", pattern: new vscode.RelativePattern(folder, "**/*") }
        : { scheme: "file" }],
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
          // The server's watcher ("**/*") sees every folder of the workspace: another folder's
          // files are its own server's.
          didChangeWatchedFile: (event, next) => (UNWATCHED.test(event.uri)
            || (folderPrefix && !event.uri.startsWith(folderPrefix)) ? Promise.resolve() : next(event)),
        },
      },
      // A function, read at each initialize: after a crash the client restarts the server with
      // these, and a value taken at activation would bring back settings the user has changed since
      // (an `endpoint` removed would send the code to that server again).
      initializationOptions: () => settings(folder),
      // No `synchronize.fileEvents`: the server registers its own watcher ("**/*") once it has a
      // workspace, and a second one here sent every create/change/delete to it twice.
    });
}

function inTurn(step) {
  queue = queue.then(step);
  return queue;
}

// Starts a server for `key` with the command set now. A start that fails (no such executable)
// is kept, saying why, until a restart (the setting fixed, `repomem: Restart the server`) makes a
// new client: vscode-languageclient cannot start again a client whose start failed.
function startServer(key, folder) {
  const server = { folder, command: configuredCommand(), failure: undefined };
  server.client = newClient(server.command, folder);
  server.client.registerProposedFeatures();
  servers.set(key, server);
  return inTurn(async () => {
    if (servers.get(key) !== server) return; // stopped or replaced before its turn
    try {
      await server.client.start();
    } catch (error) {
      // vscode-languageclient has shown its own "couldn't create connection" with the details.
      server.failure = `repomem could not start \`${server.command} serve\` (${error && error.message}): set `
        + "repomem.command in your user settings to the repomem executable, or install repomem, then run "
        + "\"repomem: Restart the server\".";
    }
  });
}

function stopServer(key) {
  const { client } = servers.get(key);
  servers.delete(key);
  // stop() rejects for a client that is not running ("Client is not running and can't be
  // stopped"): one whose start failed (no `repomem` on PATH) or that crashed too often.
  return inTurn(() => (client.needsStop() ? client.stop().catch(() => undefined) : undefined));
}

// Every server anew, with the command set now.
function restartAll() {
  for (const [key, server] of [...servers]) {
    stopServer(key);
    startServer(key, server.folder);
  }
  return queue;
}

// Starts the server of `document`'s folder if it has none yet. A file outside every folder of a
// workspace gets none (no server would index it, and one on the first folder would be that
// folder's twin): that is said once in the output channel.
function serveDocument(document) {
  if (document.uri.scheme !== "file" || !SOURCE_LANGUAGES.has(document.languageId)) return;
  const folder = outermostFolder(document.uri);
  if (!folder && hasFolders()) {
    if (!saidOutside.has(document.uri.toString())) {
      saidOutside.add(document.uri.toString());
      outputChannel.appendLine(`${document.uri.fsPath} is outside every workspace folder: repomem completes `
        + "the files of the workspace's folders only");
    }
    return;
  }
  const key = folder ? folder.uri.toString() : NO_FOLDER;
  if (!servers.has(key)) startServer(key, folder);
}

// A removed folder's server stops, and so does one whose folder is now inside another folder (the
// outer one's server takes its files); the open files of an added folder start its server.
function foldersChanged() {
  for (const [key, server] of [...servers]) {
    const stillServes = server.folder ? outermostFolder(server.folder.uri)?.uri.toString() === key : !hasFolders();
    if (!stillServes) stopServer(key);
  }
  vscode.workspace.textDocuments.forEach(serveDocument);
}

// The running server of the file at `uri`, else undefined after telling the user why there is none.
function runningClient(uri) {
  const folder = outermostFolder(uri);
  if (!folder && hasFolders()) {
    vscode.window.showErrorMessage(`${uri.fsPath} is outside every workspace folder: repomem serves the files `
      + "of the workspace's folders.");
    return undefined;
  }
  const server = servers.get(folder ? folder.uri.toString() : NO_FOLDER);
  if (server && server.client.state !== State.Stopped) return server.client; // running, or starting: requests wait
  vscode.window.showErrorMessage((server && server.failure)
    || `repomem's server${folder ? ` for the folder ${folder.name}` : ""} is not running (see Output: repomem); `
       + "run \"repomem: Restart the server\".");
  return undefined;
}

async function explainAtCursor(context) {
  const editor = vscode.window.activeTextEditor;
  if (!editor) return;
  const running = runningClient(editor.document.uri);
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
  explainChannel.clear();
  explainChannel.appendLine(JSON.stringify(result, null, 2));
  explainChannel.show(true);
}

async function activate(context) {
  outputChannel = vscode.window.createOutputChannel("repomem");
  context.subscriptions.push(outputChannel);
  // The commands and the settings' listener come first: a failed start must not leave them unregistered.
  context.subscriptions.push(vscode.commands.registerCommand("repomem.restart", () => {
    restartAll();
    vscode.workspace.textDocuments.forEach(serveDocument); // a folder whose server was never started
    return queue;
  }));
  context.subscriptions.push(vscode.commands.registerCommand("repomem.explainAtCursor", () => explainAtCursor(context)));
  context.subscriptions.push(vscode.workspace.onDidChangeConfiguration((event) => {
    const command = configuredCommand();
    if (event.affectsConfiguration("repomem.command") && [...servers.values()].some((s) => s.command !== command)) {
      restartAll(); // the server another program is: new ones, which read the settings at their start
    } else if (event.affectsConfiguration("repomem")) {
      // Under "repomem": the server takes it as every setting in force, so an empty one (the
      // user's last setting removed) unsets them all rather than reading as another server's.
      // settings() is already that object: wrapped once more, the server's "nothing changed" check
      // never held, and every change (`repomem.command`'s too) stopped its pending completions.
      // A client not started yet reads them at its start; one stopped for good rejects it.
      for (const { client, folder } of servers.values()) {
        if (client.state === State.Stopped) continue;
        client.sendNotification("workspace/didChangeConfiguration", { settings: settings(folder) })
          .catch(() => undefined);
      }
    }
  }));
  context.subscriptions.push(vscode.workspace.onDidOpenTextDocument(serveDocument));
  context.subscriptions.push(vscode.workspace.onDidChangeWorkspaceFolders(foldersChanged));
  vscode.workspace.textDocuments.forEach(serveDocument); // the file that activated the extension among them
  await queue;
  // Accepting an inline completion runs the item's command `repomem.didAccept` on the server,
  // which logs it (with its fragments) in the repository's .repomem/feedback.jsonl.
}

async function deactivate() {
  [...servers.keys()].forEach(stopServer);
  await queue;
}

module.exports = { activate, deactivate };
