"""Which code built an index, so that an index built by another repomem is rebuilt, not reused.

The format number says whether this version can read a snapshot; it does not say whether this
version would build the same one. A change to a language's call resolver, the syntax walk or the
relation kernels changes edges and W for files that did not change, and the edit path re-resolves
only what an edit touches: without this, an upgrade kept the old graph until every file changed
(the language benchmarks' indexes, built one evening, were reused through every resolver change of
the next day). The digest
covers the sources of the two packages that shape an index, the grammar packages' versions and
Python's Unicode database (which characters make words: index/identifier_chars.py); the index's
settings are the config fingerprint's part.
"""

from __future__ import annotations

import functools
import hashlib
import unicodedata
from importlib import metadata
from pathlib import Path

SHAPING_PACKAGES = ("index", "languages")  # under repomem/: everything a build or an edit runs
GRAMMAR_DISTRIBUTIONS = ("tree-sitter", "tree-sitter-language-pack")
DIGEST_CHARS = 16  # 64 bits: a mismatch by chance is not a concern, the manifest stays short


@functools.cache
def builder_digest() -> str:
    """This installation's digest, worked out once per process (~10 ms: 0.56 MB of sources)."""
    return sources_digest(Path(__file__).resolve().parents[1])


def sources_digest(package_root: Path) -> str:
    """SHA-256 over the shaping sources under `package_root` (relative path and bytes, in path
    order, so the same sources installed anywhere agree), the grammar packages' versions and the
    Unicode version."""
    digest = hashlib.sha256()
    for package in SHAPING_PACKAGES:
        for source in sorted((package_root / package).rglob("*.py")):
            digest.update(source.relative_to(package_root).as_posix().encode("utf-8") + b"\0")
            digest.update(source.read_bytes() + b"\0")
    for distribution in GRAMMAR_DISTRIBUTIONS:
        try:
            installed = metadata.version(distribution)
        except metadata.PackageNotFoundError:
            installed = "absent"
        digest.update(f"{distribution}=={installed}\0".encode())
    digest.update(f"unicode=={unicodedata.unidata_version}\0".encode())
    return digest.hexdigest()[:DIGEST_CHARS]
