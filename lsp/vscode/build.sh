#!/bin/sh
# Packages the extension as a .vsix that VS Code (or code-server) installs:
#   sh lsp/vscode/build.sh [OUT.vsix]          # default: lsp/vscode/repomem-vscode.vsix
#   code --install-extension lsp/vscode/repomem-vscode.vsix
# Needs Node and npm (the npm registry): vscode-languageclient at the version package-lock.json
# pins, and @vscode/vsce to package. Built in a temporary copy, so the checkout gets no node_modules.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=$(realpath -m "${1:-$here/repomem-vscode.vsix}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM
cp "$here/package.json" "$here/package-lock.json" "$here/extension.js" "$here/secret_files.js" \
   "$here/.vscodeignore" "$work/"
cd "$work"
npm ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error 1>&2
npx --yes @vscode/vsce@3.9.2 package --allow-missing-repository --skip-license --out "$out" >/dev/null
echo "$out"
