#!/bin/sh
# Installs code-server (VS Code's workbench served to a browser) from the npm registry, for the
# VS Code end-to-end test (tests/e2e/test_vscode.py; .ci/run calls this as root).
#   sh scripts/install_code_server.sh [PREFIX]   # default /opt/code-server, linked from /usr/local/bin
# Not `npm install -g`: code-server's own postinstall then fails in npm 11 (ENOTEMPTY in lib/vscode).
# Where /usr/local/bin is not writable, point REPOMEM_CODE_SERVER at PREFIX/node_modules/.bin/code-server.
# Two of its packages fetch from outside the npm registry or need headers at install time:
# - @vscode/ripgrep downloads rg from GitHub releases unless its cache in $TMPDIR holds the
#   archive: it is filled with Debian's rg (apt: ripgrep, the same 13.0.0 release);
# - kerberos compiles against libkrb5 (apt: libkrb5-dev); node-pty runs `npx node-gyp`.
set -eu
version=4.99.4
prefix=${1:-/opt/code-server}
rg_bin=$(command -v rg) || { echo "install_code_server: rg not found (apt-get install ripgrep)" >&2; exit 2; }
cache="${TMPDIR:-/tmp}/vscode-ripgrep-cache-1.15.11"
archive="$cache/ripgrep-v13.0.0-10-x86_64-unknown-linux-musl.tar.gz"
if [ ! -s "$archive" ]; then
  mkdir -p "$cache/rg.$$"
  cp "$rg_bin" "$cache/rg.$$/rg"
  tar czf "$archive.part" -C "$cache/rg.$$" rg
  mv "$archive.part" "$archive"
  rm -rf "$cache/rg.$$"
fi
# code-server's postinstall refuses to run as root unless npm passes "unsafe-perm" (npm 11 only
# exports it as an environment variable); npm_config_yes lets node-pty's postinstall run npx.
npm_config_unsafe_perm=true npm_config_yes=true \
  npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error "code-server@$version"
binary="$prefix/node_modules/.bin/code-server"
if [ -w /usr/local/bin ]; then
  ln -sf "$binary" /usr/local/bin/code-server
fi
"$binary" --version
