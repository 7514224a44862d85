"""The secret-masking corpus: files in the languages a repository holds, with secrets written in the
shapes people write them and look-alikes that must stay (tests/data/secrets/*.tmpl).

A template is the file's text with its planted values written as placeholders:

    API_KEY = '{{secret py-single-quoted base62/32}}'
    integrity = "{{keep npm-integrity sha512-integrity}}"

`secret` marks a value masking must hide, `keep` a look-alike it must leave as it is; the second
word names the shape (what the report counts by), the third the value's kind (KINDS). Values are
generated when the corpus is read, from a seed made of the file's name and the placeholder's
number: the same on every run, shaped like real credentials, valid for nothing, and never written
in this repository (where a secret scanner would flag them).

Scoring (`score`): a secret is caught when no 8-character stretch of it is left in the masked
text (a value masked in part leaks the rest); a look-alike is altered when it is no longer there
whole; an ordinary line (one holding no planted secret) is altered when masking changed it.
"""

from __future__ import annotations

import base64
import json
import random
import re
import string
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

CORPUS = Path(__file__).resolve().parent / "data" / "secrets"
PLACEHOLDER = re.compile(r"\{\{(secret|keep) ([a-z0-9-]+) ([a-z0-9/-]+)\}\}")
LEAK_WINDOW = 8  # characters: a stretch this long of a secret left in the text is a leak

BASE62 = string.ascii_letters + string.digits
BASE64 = BASE62 + "+/"
PASSWORD = BASE62 + "!%*+-_.^~"  # symbols a password holds that no shell, YAML or URL quoting breaks


def _pick(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _jwt(rng: random.Random) -> str:
    header = _b64url(b'{"alg":"HS256","typ":"JWT"}')
    payload = _b64url(json.dumps({"sub": str(rng.randrange(10**9)), "iat": 1700000000 + rng.randrange(10**7)}).encode())
    return f"{header}.{payload}.{_b64url(rng.randbytes(32))}"


def _pem_body(rng: random.Random) -> str:
    body = base64.b64encode(rng.randbytes(480)).decode()
    return "\n".join(body[i:i + 64] for i in range(0, len(body), 64))


# Kinds without a length: (generator). Kinds with one are "alphabet/N" (base62, hex, base64, password).
KINDS: dict[str, Callable[[random.Random], str]] = {
    "aws-id": lambda rng: "AKIA" + _pick(rng, string.ascii_uppercase + "234567", 16),
    "aws-secret": lambda rng: _pick(rng, BASE64, 40),
    "github": lambda rng: "ghp_" + _pick(rng, BASE62, 36),
    "github-pat": lambda rng: "github_pat_" + _pick(rng, BASE62 + "_", 82),
    "gitlab": lambda rng: "glpat-" + _pick(rng, BASE62, 20),
    "slack": lambda rng: f"xoxb-{_pick(rng, string.digits, 12)}-{_pick(rng, string.digits, 13)}-"
                         f"{_pick(rng, BASE62, 24)}",
    "slack-webhook": lambda rng: f"T{_pick(rng, string.ascii_uppercase + string.digits, 10)}/"
                                 f"B{_pick(rng, string.ascii_uppercase + string.digits, 10)}/{_pick(rng, BASE62, 24)}",
    "stripe": lambda rng: "sk_live_" + _pick(rng, BASE62, 24),
    "openai": lambda rng: "sk-proj-" + _pick(rng, BASE62 + "_-", 48),
    "anthropic": lambda rng: "sk-ant-api03-" + _pick(rng, BASE62 + "_-", 80),
    "google": lambda rng: "AIza" + _pick(rng, BASE62 + "_-", 35),
    "huggingface": lambda rng: "hf_" + _pick(rng, BASE62, 34),
    "npm": lambda rng: "npm_" + _pick(rng, BASE62, 36),
    "jwt": _jwt,
    "pem-body": _pem_body,
    "basic-auth": lambda rng: base64.b64encode(f"deploy:{_pick(rng, BASE62, 16)}".encode()).decode(),
    # look-alikes
    "uuid": lambda rng: str(uuid.UUID(int=rng.getrandbits(128), version=4)),
    "sha1": lambda rng: _pick(rng, "0123456789abcdef", 40),
    "sha256": lambda rng: _pick(rng, "0123456789abcdef", 64),
    "md5": lambda rng: _pick(rng, "0123456789abcdef", 32),
    "sha512-integrity": lambda rng: "sha512-" + base64.b64encode(rng.randbytes(64)).decode(),
    "go-sum": lambda rng: "h1:" + base64.b64encode(rng.randbytes(32)).decode(),
}
ALPHABETS = {"base62": BASE62, "hex": "0123456789abcdef", "base64": BASE64, "password": PASSWORD}


def generate(kind: str, rng: random.Random) -> str:
    if kind in KINDS:
        return KINDS[kind](rng)
    alphabet, _, length = kind.partition("/")
    if alphabet not in ALPHABETS or not length.isdigit():
        raise ValueError(f"unknown value kind {kind!r}")
    while True:  # a random value with no digit (or no letter) is drawn again: real keys hold both
        value = _pick(rng, ALPHABETS[alphabet], int(length))
        if any(c.isdigit() for c in value) and any(c.isalpha() for c in value):
            return value


@dataclass(frozen=True)
class Planted:
    shape: str
    value: str
    secret: bool  # False: a look-alike that must stay
    line: int  # 0-based line of the rendered file where the value starts


@dataclass(frozen=True)
class CorpusFile:
    path: str  # the template's name without ".tmpl": its language shows in it
    text: str
    planted: tuple[Planted, ...]

    def secret_lines(self) -> set[int]:
        """Lines holding a secret (each line of a value that spans several)."""
        return {p.line + i for p in self.planted if p.secret for i in range(p.value.count("\n") + 1)}


def render(path: str, template: str) -> CorpusFile:
    pieces: list[str] = []
    planted: list[Planted] = []
    position = 0
    for number, match in enumerate(PLACEHOLDER.finditer(template)):
        pieces.append(template[position:match.start()])
        value = generate(match[3], random.Random(f"{path}:{number}"))
        planted.append(Planted(match[2], value, match[1] == "secret", "".join(pieces).count("\n")))
        pieces.append(value)
        position = match.end()
    pieces.append(template[position:])
    return CorpusFile(path, "".join(pieces), tuple(planted))


def corpus_files(directory: Path = CORPUS) -> list[CorpusFile]:
    return [render(template.name.removesuffix(".tmpl"), template.read_text(encoding="utf-8"))
            for template in sorted(directory.glob("*.tmpl"))]


def leaked(value: str, text: str) -> bool:
    """Whether any LEAK_WINDOW-character stretch of `value` (of each of its lines) is in `text`."""
    for line in value.split("\n"):
        width = min(LEAK_WINDOW, len(line))
        if any(line[i:i + width] in text for i in range(len(line) - width + 1)):
            return True
    return False


@dataclass
class Score:
    secrets: int = 0
    caught: int = 0
    lookalikes: int = 0
    lookalikes_altered: int = 0
    ordinary_lines: int = 0  # non-blank lines holding no secret
    ordinary_altered: int = 0
    by_shape: dict[str, list[int]] = field(default_factory=dict)  # shape: [planted, caught or kept]
    missed: list[str] = field(default_factory=list)  # "path: shape: the line", for the reader
    altered: list[str] = field(default_factory=list)

    @property
    def recall(self) -> float:
        return self.caught / self.secrets if self.secrets else 1.0

    @property
    def lookalike_false_positive_rate(self) -> float:
        return self.lookalikes_altered / self.lookalikes if self.lookalikes else 0.0

    @property
    def ordinary_false_positive_rate(self) -> float:
        return self.ordinary_altered / self.ordinary_lines if self.ordinary_lines else 0.0

    def shapes(self, secret: bool) -> dict[str, list[int]]:
        return {shape: counts for shape, counts in self.by_shape.items() if (counts[2] == 1) == secret}


def score(files: list[CorpusFile], mask: Callable[[str], str]) -> Score:
    """Mask each file's text with `mask` and count what was caught, kept and altered."""
    result = Score()
    for file in files:
        masked = mask(file.text)
        lines, masked_lines = file.text.split("\n"), masked.split("\n")
        assert len(lines) == len(masked_lines), f"{file.path}: masking moved line breaks"
        for planted in file.planted:
            counts = result.by_shape.setdefault(f"{file.path.rsplit('.', 1)[-1]}: {planted.shape}",
                                                [0, 0, int(planted.secret)])
            counts[0] += 1
            if planted.secret:
                result.secrets += 1
                if leaked(planted.value, masked):  # the line as its template has it: no value is written out
                    line = lines[planted.line].replace(planted.value.split("\n")[0], "{{secret}}")
                    result.missed.append(f"{file.path}:{planted.line + 1}: {planted.shape}: {line}")
                else:
                    result.caught += 1
                    counts[1] += 1
            else:
                result.lookalikes += 1
                if planted.value in masked:
                    counts[1] += 1
                else:
                    result.lookalikes_altered += 1
                    result.altered.append(f"{file.path}:{planted.line + 1}: {planted.shape}: "
                                          f"{masked_lines[planted.line]}")
        secret_lines = file.secret_lines()
        for number, (line, masked_line) in enumerate(zip(lines, masked_lines)):
            if number in secret_lines or not line.strip():
                continue
            result.ordinary_lines += 1
            if line != masked_line:
                result.ordinary_altered += 1
                result.altered.append(f"{file.path}:{number + 1}: {masked_line}")
    return result
