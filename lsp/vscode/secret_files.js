// Files the extension never sends to repomem: no didOpen / didChange, no completion requests.
// The server refuses them too (scan.secret_patterns, the error `secret-file`); this keeps their text
// from leaving the editor at all. The list is repomem's default scan.secret_patterns
// (tests/unit/test_security.py checks they agree, and that both match the same names).
const fs = require("fs");
const path = require("path");

const SECRET_PATTERNS = [
  ".env*", "*.env", "*.pem", "*.key", "*.crt", "*.cer", "*.p12", "*.pfx", "*.jks", "*.keystore", "*.ppk",
  "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*", ".netrc", "_netrc", ".pgpass", ".my.cnf", ".htpasswd",
  ".npmrc", ".pypirc", ".yarnrc", ".yarnrc.yml", ".git-credentials", ".dockercfg", ".s3cfg", ".boto",
  ".vault-token", "credentials", "credentials.*", "credentials*.json", "kubeconfig", "kubeconfig.*",
  "*.kubeconfig", "*.kdbx", "*.tfstate", "*.tfstate.*", "*.tfvars", "secrets.*", "secret.*",
];

// A shell glob as Python's fnmatch reads it (`*` any run of characters, `?` one), on a file name.
function globToRegExp(glob) {
  let out = "";
  for (const character of glob) {
    if (character === "*") out += ".*";
    else if (character === "?") out += ".";
    else out += character.replace(/[.+^${}()|[\]\\]/g, "\\$&");
  }
  return out;
}

// Any case as Python's re.IGNORECASE has it: "u" folds the Kelvin sign to k and the long s to s
// (as Python does); Python also takes both Turkish i's for i, which no JS flag does, so they are
// made i first (without this, `ſecrets.py` or `ıd_rsa` reached a server that refuses them).
const SECRET_NAME = new RegExp(`^(?:${SECRET_PATTERNS.map(globToRegExp).join("|")})$`, "isu");

function isSecretName(name) {
  return SECRET_NAME.test(name.replace(/[\u0130\u0131]/g, "i"));
}

// A symbolic link is judged by its target's name too (`settings_env.py -> .env`), as the server does.
function isSecretPath(filePath) {
  if (isSecretName(path.basename(filePath))) return true;
  try {
    return isSecretName(path.basename(fs.realpathSync(filePath)));
  } catch {
    return false; // no such file (yet): its name alone decides
  }
}

function isSecretDocument(document) {
  return document.uri.scheme === "file" && isSecretPath(document.uri.fsPath);
}

module.exports = { SECRET_PATTERNS, isSecretPath, isSecretDocument };
