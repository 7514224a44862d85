// Files the extension never sends to repomem: no didOpen / didChange, no completion requests.
// The server refuses them too (scan.secret_patterns, the error `secret-file`); this keeps their text
// from leaving the editor at all. The list is repomem's default scan.secret_patterns
// (tests/unit/test_security.py checks they agree, and that both match the same names).
const path = require("path");

const SECRET_PATTERNS = [
  ".env", ".env.*", "*.env", "*.pem", "*.key", "*.crt", "*.cer", "*.p12", "*.pfx", "*.jks",
  "*.keystore", "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*", ".netrc", ".pgpass",
  "*.kdbx", "credentials*.json", "credentials.*", "secrets.*", "secret.*", ".htpasswd",
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

const SECRET_NAME = new RegExp(`^(?:${SECRET_PATTERNS.map(globToRegExp).join("|")})$`, "is");

function isSecretPath(filePath) {
  return SECRET_NAME.test(path.basename(filePath));
}

function isSecretDocument(document) {
  return document.uri.scheme === "file" && isSecretPath(document.uri.fsPath);
}

module.exports = { SECRET_PATTERNS, isSecretPath, isSecretDocument };
