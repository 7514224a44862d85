"""The VS Code extension (lsp/vscode/extension.js) run in Node against stubs of the `vscode` module
and of vscode-languageclient's LanguageClient: what it hands the client and sends the server, without
VS Code (tests/e2e/test_vscode.py drives the real one in code-server). The stub client reads
`initializationOptions` as vscode-languageclient 9 does at each initialize (a function is called,
a value sent as it is), its first start and every restart after a crash alike, and reports its
state as the real one does (`state` is Stopped before the start and after a failed one)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from repomem.lsp.settings import settings_after_change

VSCODE = Path(__file__).resolve().parents[2] / "lsp" / "vscode"

# The stubs; a scenario (below) follows them and prints its record as JSON.
STUBS = r"""
const Module = require("module");
const [extensionDir] = process.argv.slice(1);
const user = { topK: 4, command: "repomem" };  // the user's settings (globalValue)
const workspace = {};  // the workspace's (.vscode/settings.json: workspaceValue)
const seen = { clients: [], notifications: [], initializationOptions: [], channels: [], lines: [], errors: [],
               commands: {}, listeners: {} };
const on = (event) => (listener) => { (seen.listeners[event] ||= []).push(listener); return { dispose() {} }; };
const fire = (event, value) => (seen.listeners[event] || []).forEach((listener) => listener(value));
const settle = () => new Promise((resolve) => setTimeout(resolve, 20));
const file = (path) => ({ scheme: "file", fsPath: path, path, toString: () => `file://${path}` });
const folder = (path, index) => ({ uri: file(path), name: path.split("/").pop(), index });
const doc = (path, languageId = "python") => ({ uri: file(path), languageId });
const inside = (uri, base) => `${uri.toString()}/`.startsWith(`${base.uri.toString()}/`);
// VS Code's glob syntax (**, *, ?, [...], {a,b}) as a regular expression over a whole path.
const globRegExp = (glob) => new RegExp(`^${glob.replace(/\*\*\/|\*\*|\*|\?|\[[^\]]*\]|\{[^}]*\}|[.+^$()|\\]/g,
  (token) => ({ "**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]" }[token]
    ?? (token.startsWith("[") ? token.replace("[!", "[^") : token.startsWith("{")
      ? `(?:${token.slice(1, -1).split(",").map((word) => word.replace(/[.*+?^$()|[\]\\]/g, "\\$&")).join("|")})`
      : `\\${token}`)))}$`);
class RelativePattern {  // stub: vscode.RelativePattern(base: WorkspaceFolder | Uri, pattern)
  constructor(base, pattern) { Object.assign(this, { baseUri: base.uri || base, pattern }); }
}
// languages.match as VS Code scores a filter: a string pattern is a glob over the file's fsPath, a
// RelativePattern's glob is matched against the path below its base.
const matches = (filter, document) => filter.scheme === document.uri.scheme && (filter.pattern === undefined
  || (typeof filter.pattern === "string" ? globRegExp(filter.pattern).test(document.uri.fsPath)
    : inside(document.uri, { uri: filter.pattern.baseUri })
      && globRegExp(filter.pattern.pattern).test(document.uri.path.slice(filter.pattern.baseUri.path.length + 1))));

class LanguageClient {  // stub: the parts of vscode-languageclient 9 the extension uses
  constructor(id, name, server, options) {
    Object.assign(this, { id, name, server, options, $state: "initial", requests: [] });
    seen.clients.push(this);
  }
  get state() { return { starting: "starting", running: "running" }[this.$state] || "stopped"; }
  registerProposedFeatures() {}
  async start() {  // client.ts initialize(): Is.func(initOption) ? initOption() : initOption
    const option = this.options.initializationOptions;
    seen.initializationOptions.push(JSON.parse(JSON.stringify(typeof option === "function" ? option() : option)));
    this.$state = "running";
  }
  needsStop() { return this.$state === "starting" || this.$state === "running"; }
  async stop() {  // client.ts shutdown(): only a running client can be stopped
    if (this.$state !== "running") {
      throw new Error(`Client is not running and can't be stopped. It's current state is: ${this.$state}`);
    }
    this.$state = "stopped";
  }
  async sendNotification(method, params) {
    if (this.$state !== "running" && this.$state !== "starting") throw new Error("Client is not running");
    seen.notifications.push({ client: this.name, method, params });
  }
  async sendRequest(method, params) {
    this.requests.push(params.arguments[0].textDocument.uri);
    return { fragments: [] };
  }
}

const vscode = {  // stub
  RelativePattern,
  workspace: {
    workspaceFolders: [folder("/r", 0)],
    textDocuments: [doc("/r/a.py")],
    getWorkspaceFolder: (uri) => vscode.workspace.workspaceFolders.filter((f) => inside(uri, f))
      .sort((a, b) => b.uri.path.length - a.uri.path.length)[0],  // the innermost, as VS Code's
    getConfiguration: () => ({ inspect: (key) => ({ key, globalValue: user[key], workspaceValue: workspace[key] }) }),
    onDidChangeConfiguration: on("configuration"),
    onDidOpenTextDocument: on("open"),
    onDidChangeWorkspaceFolders: on("folders"),
    createFileSystemWatcher: () => ({ dispose() {} }),
  },
  window: {
    activeTextEditor: { document: doc("/r/a.py"), selection: { active: { line: 1, character: 2 } } },
    showErrorMessage: async (message) => { seen.errors.push(message); },
    createOutputChannel: (name) => {
      seen.channels.push(name);
      return { clear() {}, appendLine: (line) => seen.lines.push(line), show() {}, dispose() {} };
    },
  },
  commands: { registerCommand: (id, run) => { seen.commands[id] = run; return { dispose() {} }; } },
};
const open = async (document) => {
  vscode.workspace.textDocuments.push(document);
  fire("open", document);
  await settle();
};
const settingsChanged = () => fire("configuration", { affectsConfiguration: (s) => s === "repomem" });
const describe = (client) => ({ name: client.name, state: client.state, server: client.server,
                                folder: client.options.workspaceFolder && client.options.workspaceFolder.name,
                                selector: client.options.documentSelector.map((filter) => (
                                  typeof filter.pattern === "object"
                                    ? { ...filter, pattern: { base: filter.pattern.baseUri.toString(),
                                                              pattern: filter.pattern.pattern } }
                                    : filter)),
                                selects: vscode.workspace.textDocuments.filter((document) => client.options
                                  .documentSelector.some((filter) => matches(filter, document)))
                                  .map((document) => document.uri.path),
                                requests: [...client.requests] });

const load = Module._load;
Module._load = function (request, ...rest) {
  if (request === "vscode") return vscode;
  if (request === "vscode-languageclient/node") {
    return { LanguageClient, State: { Stopped: "stopped", Running: "running", Starting: "starting" } };
  }
  return load.call(this, request, ...rest);
};
const extension = require(require("path").join(extensionDir, "extension.js"));
const context = { subscriptions: [] };
"""

# One folder, /r, its a.py open: settings, a crash, explain, a client stopped for good.
SESSION = STUBS + r"""
(async () => {
  await extension.activate(context);
  user.topK = 7;  // the user changes a setting: sent at once
  settingsChanged();
  await settle();
  // The server crashes; vscode-languageclient restarts it (state initial, then start()).
  const [client] = seen.clients;
  client.$state = "initial";
  await client.start();
  // Explain twice: one output channel.
  await seen.commands["repomem.explainAtCursor"]();
  await seen.commands["repomem.explainAtCursor"]();
  // The server crashed too often: the client is stopped for good; a change and the deactivation.
  client.$state = "stopped";
  user.topK = 9;
  let unhandled = null;
  process.on("unhandledRejection", (error) => { unhandled = String(error); });
  settingsChanged();
  client.$state = "startFailed";
  let deactivated = "ok";
  try { await extension.deactivate(); } catch (error) { deactivated = String(error); }
  await settle();
  console.log(JSON.stringify({ ...seen, clients: seen.clients.map(describe), listeners: Object.keys(seen.listeners),
                               commands: Object.keys(seen.commands), subscriptions: context.subscriptions.length,
                               unhandled, deactivated }));
})().catch((error) => { console.error(error); process.exit(1); });
"""

# A multi-root workspace: /w/first (with /w/first/nested, a folder of its own) and /w/second.
# Each step records the clients as they are then.
MULTI_ROOT = STUBS + r"""
(async () => {
  const [first, nested, second] = [folder("/w/first", 0), folder("/w/first/nested", 1), folder("/w/second", 2)];
  vscode.workspace.workspaceFolders = [first, nested, second];
  vscode.workspace.textDocuments = [doc("/w/first/a.py")];
  const steps = {};
  const step = (name) => { steps[name] = seen.clients.map(describe); };
  await extension.activate(context);
  step("activated");
  await open(doc("/w/second/b.py"));
  step("second");
  await open(doc("/w/first/nested/c.py"));
  await open(doc("/w/second/notes.md", "markdown"));
  await open(doc("/elsewhere/loose.py"));
  step("nestedMarkdownLoose");
  vscode.window.activeTextEditor.document = doc("/w/second/b.py");
  await seen.commands["repomem.explainAtCursor"]();
  vscode.window.activeTextEditor.document = doc("/elsewhere/loose.py");
  await seen.commands["repomem.explainAtCursor"]();
  step("explained");
  settingsChanged();
  await settle();
  await seen.commands["repomem.restart"]();
  step("restarted");
  // `second` leaves the workspace, then `first`: `nested` is a folder of its own again, with c.py open.
  vscode.workspace.workspaceFolders = [first, nested];
  fire("folders", { added: [], removed: [second] });
  await settle();
  step("secondRemoved");
  vscode.workspace.workspaceFolders = [nested];
  fire("folders", { added: [], removed: [first] });
  await settle();
  step("firstRemoved");
  await extension.deactivate();
  step("deactivated");
  console.log(JSON.stringify({ steps, notifications: seen.notifications, lines: seen.lines, errors: seen.errors }));
})().catch((error) => { console.error(error); process.exit(1); });
"""

# Folders whose paths hold glob characters, beside a folder such a glob would match: each folder's
# file open, then each client's view of the open files.
GLOB_FOLDERS = STUBS + r"""
(async () => {
  const folders = ["/w/[draft]", "/w/d", "/w/{x,y} *?"].map(folder);
  vscode.workspace.workspaceFolders = folders;
  vscode.workspace.textDocuments = [doc("/w/[draft]/a.py")];
  await extension.activate(context);
  await open(doc("/w/d/b.py"));
  await open(doc("/w/{x,y} *?/c.py"));
  await open(doc("/w/x *?/d.py"));
  console.log(JSON.stringify({ clients: seen.clients.map(describe), lines: seen.lines }));
})().catch((error) => { console.error(error); process.exit(1); });
"""


# A repository's .vscode/settings.json that sets every repomem setting: what reaches the server.
EVERY_SETTING = STUBS + r"""
(async () => {
  delete user.topK;
  const declared = require(require("path").join(extensionDir, "package.json")).contributes.configuration.properties;
  for (const [key, property] of Object.entries(declared)) {
    workspace[key.slice("repomem.".length)] = property.enum ? property.enum[0] : `set ${key}`;
  }
  await extension.activate(context);
  console.log(JSON.stringify({ initializationOptions: seen.initializationOptions,
                               clients: seen.clients.map(describe) }));
})().catch((error) => { console.error(error); process.exit(1); });
"""


def run_extension(extension_dir: Path, scenario: str = SESSION) -> dict:
    """The harness's record of one session of the extension at `extension_dir`."""
    result = subprocess.run(["node", "-e", scenario, str(extension_dir)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


pytestmark = pytest.mark.skipif(shutil.which("node") is None,
                                reason="node is not installed: the VS Code extension cannot run")


def below(folder_uri: str) -> dict:
    """A document filter for the files below a folder: a pattern relative to it (RelativePattern)."""
    return {"scheme": "file", "pattern": {"base": folder_uri, "pattern": "**/*"}}


@pytest.fixture(scope="module")
def session() -> dict:
    return run_extension(VSCODE)


def test_the_server_is_started_as_repomem_serve_for_the_folder(session):
    [client] = session["clients"]
    assert client["server"] == {"command": "repomem", "args": ["serve"]}
    assert client["folder"] == "r" and client["selector"] == [below("file:///r")]
    assert sorted(session["commands"]) == ["repomem.explainAtCursor", "repomem.restart"]


def test_a_restart_after_a_crash_gets_the_settings_in_force_then(session):
    """vscode-languageclient restarts a crashed server with `initializationOptions` again: a value
    taken at activation brought back topK 4 (or an `endpoint` since removed) after a crash."""
    first, restarted = session["initializationOptions"]
    assert first == {"repomem": {"topK": 4}}
    assert restarted == {"repomem": {"topK": 7}}


def test_a_change_is_sent_as_the_server_reads_it(session):
    """`settings` of workspace/didChangeConfiguration is {"repomem": {...}}, once: wrapped twice, the
    same settings read as a change on the server, which stopped every pending completion."""
    sent = [n for n in session["notifications"] if n["method"] == "workspace/didChangeConfiguration"]
    assert [n["params"] for n in sent] == [{"settings": {"repomem": {"topK": 7}}}]
    in_force = {"topK": 7}
    assert settings_after_change(in_force, sent[0]["params"]["settings"]) == in_force


def test_explain_reuses_one_output_channel(session):
    """Two explains, one channel for them; the server's log has its own, made once."""
    assert sorted(session["channels"]) == ["repomem", "repomem explain"]
    assert session["clients"][0]["requests"] == ["file:///r/a.py"] * 2


def test_a_stopped_client_is_neither_stopped_again_nor_left_with_a_rejected_notification(session):
    assert session["deactivated"] == "ok"
    assert session["unhandled"] is None


# -- a multi-root workspace: a server per folder ---------------------------------------------------------


@pytest.fixture(scope="module")
def multi_root() -> dict:
    return run_extension(VSCODE, MULTI_ROOT)


def running(clients: list[dict]) -> list[str | None]:
    return [client["folder"] for client in clients if client["state"] == "running"]


def test_each_folder_gets_its_own_server_when_its_first_file_opens(multi_root):
    """One server indexes one folder: a single client sent the second folder's files to the
    first folder's server, which answered nothing for them ("outside the workspace folder")."""
    steps = multi_root["steps"]
    assert running(steps["activated"]) == ["first"]  # second has no file open yet: no server
    assert running(steps["second"]) == ["first", "second"]
    by_folder = {client["folder"]: client for client in steps["second"]}
    assert by_folder["first"]["selector"] == [below("file:///w/first")]
    assert by_folder["second"]["selector"] == [below("file:///w/second")]
    assert by_folder["first"]["selects"] == ["/w/first/a.py"] and by_folder["second"]["selects"] == ["/w/second/b.py"]
    assert by_folder["second"]["name"] == "repomem (second)"
    assert by_folder["second"]["server"] == {"command": "repomem", "args": ["serve"]}


def test_a_nested_folder_a_non_source_file_and_a_file_outside_start_no_server(multi_root):
    """A folder inside another is the outer one's (its files are in that index already); a
    Markdown file starts nothing; a file outside every folder is said in the output channel."""
    assert running(multi_root["steps"]["nestedMarkdownLoose"]) == ["first", "second"]
    assert any("/elsewhere/loose.py is outside every workspace folder" in line for line in multi_root["lines"])


def test_explain_asks_the_server_of_the_active_files_folder(multi_root):
    by_folder = {client["folder"]: client for client in multi_root["steps"]["explained"]}
    assert by_folder["second"]["requests"] == ["file:///w/second/b.py"]
    assert by_folder["first"]["requests"] == []
    assert any("loose.py is outside every workspace folder" in error for error in multi_root["errors"])


def test_a_settings_change_reaches_every_server(multi_root):
    sent = [n["client"] for n in multi_root["notifications"] if n["method"] == "workspace/didChangeConfiguration"]
    assert sorted(sent) == ["repomem (first)", "repomem (second)"]


def test_restart_starts_every_server_anew(multi_root):
    restarted = multi_root["steps"]["restarted"]
    assert [(c["folder"], c["state"]) for c in restarted] == [
        ("first", "stopped"), ("second", "stopped"), ("first", "running"), ("second", "running")]


def test_a_folder_removed_stops_its_server_and_a_folder_no_longer_nested_gets_one(multi_root):
    steps = multi_root["steps"]
    assert running(steps["secondRemoved"]) == ["first"]
    assert running(steps["firstRemoved"]) == ["nested"]  # c.py is open in it
    [nested] = [client for client in steps["firstRemoved"] if client["folder"] == "nested"]
    assert nested["selector"] == [below("file:///w/first/nested")]
    assert nested["selects"] == ["/w/first/nested/c.py"]
    assert running(steps["deactivated"]) == []


def test_a_folder_whose_path_holds_glob_characters_gets_its_own_files_only():
    """The selector was a glob spelled from the folder's path: `/w/[draft]/**/*` reads `[draft]` as
    one of d, r, a, f, t, so the server of /w/[draft] got none of its own files and every file of
    /w/d; `{x,y} *?` matched /w/x a/ and /w/y b/ and not itself. The selector's pattern is now
    relative to the folder (vscode.RelativePattern), which VS Code matches below the folder."""
    clients = run_extension(VSCODE, GLOB_FOLDERS)["clients"]
    assert {client["folder"]: client["selects"] for client in clients if client["state"] == "running"} == {
        "[draft]": ["/w/[draft]/a.py"], "d": ["/w/d/b.py"], "{x,y} *?": ["/w/{x,y} *?/c.py"]}


def test_every_server_setting_is_sent_and_a_repository_sets_none_of_the_users_own():
    """The extension sent 9 named settings: `warmAfterMs`, `embeddedModel`, `indexNice`, ... set in
    VS Code never reached the server. It sends every setting package.json declares now (each one the
    server takes: test_editor_docs.py), and from a workspace's settings only those a repository may
    set: not the model, the endpoint, the feedback log or the program."""
    from repomem.lsp.settings import CLIENT_SETTINGS

    record = run_extension(VSCODE, EVERY_SETTING)
    [sent] = record["initializationOptions"]
    user_only = {name for name, target in CLIENT_SETTINGS.items() if target.rules.repository == "not a repository"}
    assert set(sent["repomem"]) == set(CLIENT_SETTINGS) - user_only
    assert record["clients"][0]["server"] == {"command": "repomem", "args": ["serve"]}
