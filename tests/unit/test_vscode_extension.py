"""The VS Code extension (lsp/vscode/extension.js) run in Node against stubs of the `vscode` module
and of vscode-languageclient's LanguageClient: what it hands the client and sends the server, without
VS Code (tests/e2e/test_vscode.py drives the real one in code-server). The stub client reads
`initializationOptions` as vscode-languageclient 9 does at each initialize (a function is called,
a value sent as it is), its first start and every restart after a crash alike."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from repomem.lsp.settings import settings_after_change

VSCODE = Path(__file__).resolve().parents[2] / "lsp" / "vscode"

HARNESS = r"""
const Module = require("module");
const [extensionDir] = process.argv.slice(1);
const user = { topK: 4, command: "repomem" };  // the user's settings (globalValue)
const seen = { notifications: [], initializationOptions: [], channels: [], commands: {}, listeners: [] };

class LanguageClient {  // stub: the parts of vscode-languageclient 9 the extension uses
  constructor(id, name, server, options) {
    this.options = options; this.state = "initial"; seen.server = server; seen.instance = this;
  }
  registerProposedFeatures() {}
  async start() {  // client.ts initialize(): Is.func(initOption) ? initOption() : initOption
    const option = this.options.initializationOptions;
    seen.initializationOptions.push(JSON.parse(JSON.stringify(typeof option === "function" ? option() : option)));
    this.state = "running";
  }
  needsStop() { return this.state === "starting" || this.state === "running"; }
  async stop() {  // client.ts shutdown(): only a running client can be stopped
    if (this.state !== "running") {
      throw new Error(`Client is not running and can't be stopped. It's current state is: ${this.state}`);
    }
    this.state = "stopped";
  }
  async sendNotification(method, params) {
    if (this.state !== "running" && this.state !== "starting") throw new Error("Client is not running");
    seen.notifications.push({ method, params });
  }
  async sendRequest() { return { fragments: [] }; }
}

const vscode = {  // stub
  workspace: {
    getConfiguration: () => ({ inspect: (key) => ({ key, globalValue: user[key] }) }),
    onDidChangeConfiguration: (listener) => { seen.listeners.push(listener); return { dispose() {} }; },
    createFileSystemWatcher: () => ({ dispose() {} }),
  },
  window: {
    activeTextEditor: { document: { uri: { toString: () => "file:///r/a.py" } },
                        selection: { active: { line: 1, character: 2 } } },
    createOutputChannel: (name) => {
      seen.channels.push(name); return { clear() {}, appendLine() {}, show() {}, dispose() {} };
    },
  },
  commands: { registerCommand: (id, run) => { seen.commands[id] = run; return { dispose() {} }; } },
};

const load = Module._load;
Module._load = function (request, ...rest) {
  if (request === "vscode") return vscode;
  if (request === "vscode-languageclient/node") {
    return { LanguageClient, State: { Stopped: "stopped", Running: "running", Starting: "starting" } };
  }
  return load.call(this, request, ...rest);
};

(async () => {
  const extension = require(require("path").join(extensionDir, "extension.js"));
  const context = { subscriptions: [] };
  await extension.activate(context);
  const change = () => seen.listeners.forEach((listener) => listener({ affectsConfiguration: (s) => s === "repomem" }));
  user.topK = 7;  // the user changes a setting: sent at once
  change();
  await new Promise((resolve) => setImmediate(resolve));
  // The server crashes; vscode-languageclient restarts it (state initial, then start()).
  const instance = seen.instance;
  instance.state = "initial";
  await instance.start();
  // Explain twice: one output channel.
  await seen.commands["repomem.explainAtCursor"]();
  await seen.commands["repomem.explainAtCursor"]();
  // The server crashed too often: the client is stopped for good; a change and the deactivation.
  instance.state = "stopped";
  user.topK = 9;
  let unhandled = null;
  process.on("unhandledRejection", (error) => { unhandled = String(error); });
  change();
  instance.state = "startFailed";
  let deactivated = "ok";
  try { await extension.deactivate(); } catch (error) { deactivated = String(error); }
  await new Promise((resolve) => setTimeout(resolve, 50));
  const { instance: _, ...record } = seen;
  console.log(JSON.stringify({ ...record, listeners: seen.listeners.length, commands: Object.keys(seen.commands),
                               subscriptions: context.subscriptions.length, unhandled, deactivated }));
})().catch((error) => { console.error(error); process.exit(1); });
"""


def run_extension(extension_dir: Path) -> dict:
    """The harness's record of one session of the extension at `extension_dir`."""
    result = subprocess.run(["node", "-e", HARNESS, str(extension_dir)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


pytestmark = pytest.mark.skipif(shutil.which("node") is None,
                                reason="node is not installed: the VS Code extension cannot run")


@pytest.fixture(scope="module")
def session() -> dict:
    return run_extension(VSCODE)


def test_the_server_is_started_as_repomem_serve(session):
    assert session["server"] == {"command": "repomem", "args": ["serve"]}
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


def test_a_stopped_client_is_neither_stopped_again_nor_left_with_a_rejected_notification(session):
    assert session["deactivated"] == "ok"
    assert session["unhandled"] is None
