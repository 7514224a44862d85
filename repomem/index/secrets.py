"""Secrets inside code: found by their shape and masked before anything is indexed or sent to a model.

File-name patterns (config.ScanConfig.secret_patterns) keep `.env` files and keys out; this catches
the ones written into code, after the rules gitleaks and detect-secrets use: provider key prefixes
(AWS, GitHub, GitLab, Slack, Stripe, OpenAI, Anthropic, Google, Hugging Face, npm, PyPI), private-key
blocks, JSON Web Tokens, passwords in URLs, and string values assigned to secret-sounding names
whose characters look random (Shannon entropy per character). The secret is replaced by
`[REDACTED]`; line breaks are kept, so line numbers, windows and cursors do not move.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable

MASK = "[REDACTED]"

# Whole-token secrets recognisable by their prefix and alphabet: (literals one of which every match
# of the shape holds, the shape). The literals let a file without any of them skip the regex: Python
# tries its alternation at every position (0.47 s of CPU on Django's 17 MB, where no file had a
# key), while a substring test per literal runs at memory speed.
_PROVIDER_KEY_SHAPES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("A3T", "AKIA", "ASIA", "ABIA", "ACCA"), r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}"),  # AWS access key id
    (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), r"gh[pousr]_[A-Za-z0-9]{36,255}"),  # GitHub tokens
    (("github_pat_",), r"github_pat_[A-Za-z0-9_]{60,255}"),
    (("glpat-",), r"glpat-[A-Za-z0-9_-]{20,}"),  # GitLab
    (("xox",), r"xox[abposr]-[A-Za-z0-9-]{10,}"),  # Slack
    (("k_live_", "k_test_"), r"(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}"),  # Stripe
    (("sk-",), r"sk-ant-[A-Za-z0-9_-]{20,}"),  # Anthropic
    (("sk-",), r"sk-(?:proj-|live-|test-)?[A-Za-z0-9_-]{20,}"),  # OpenAI and look-alikes
    (("AIza",), r"AIza[0-9A-Za-z_-]{35}"),  # Google API key
    (("hf_",), r"hf_[A-Za-z0-9]{30,}"),  # Hugging Face
    (("npm_",), r"npm_[A-Za-z0-9]{36}"),  # npm
    (("pypi-AgEIcHlwaS5vcmc",), r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}"),  # PyPI upload token
    (("eyJ",), r"eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"),  # JSON Web Token
)
_PROVIDER_KEYS = re.compile(
    r"(?<![A-Za-z0-9])(?:" + "|".join(shape for _, shape in _PROVIDER_KEY_SHAPES) + r")(?![A-Za-z0-9])"
)
_PROVIDER_KEY_LITERALS = tuple(dict.fromkeys(literal for literals, _ in _PROVIDER_KEY_SHAPES for literal in literals))
_PRIVATE_KEY = re.compile(
    r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----(?P<body>.*?)-----END[A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----",
    re.DOTALL,
)
_URL_PASSWORD = re.compile(r"(?P<head>\b[a-z][a-z0-9+.-]*://[^/\s:@'\"]+:)(?P<secret>[^/\s@'\"]{3,})(?=@)")
# name = "value" / name: 'value' / "name": "value" where the name sounds secret.
_SECRET_WORD = (r"(?:api[_-]?key|secret|token|passw(?:or)?d|passwd|pwd|credential|auth[_-]?key|private[_-]?key|"
                r"access[_-]?key)")
_NAME_CHAR = "A-Za-z0-9_.-"
_ASSIGNED = re.compile(
    rf"(?i)(?<![{_NAME_CHAR}])"  # names start where a run of name characters starts (the leftmost match)
    rf"(?P<name>[{_NAME_CHAR}]*{_SECRET_WORD}[{_NAME_CHAR}]*)['\"]?"
    r"(?:\s*:\s*[A-Za-z_][\w\[\]., |]*?)?\s*(?::=|=|:|=>)\s*"  # an optional type annotation
    r"(?P<quote>['\"])(?P<secret>[^'\"\s]+)(?P=quote)"
)
_SECRET_WORD_ANY_CASE = re.compile(_SECRET_WORD, re.IGNORECASE)
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


# Every match of _SECRET_WORD holds one of these (api[_-]?key and the other *key words: "key";
# passw(or)?d and passwd: "passw"); a test checks each spelling of the word.
_SECRET_WORD_LITERALS = ("key", "secret", "token", "passw", "pwd", "credential")


def assignments(text: str) -> list[re.Match]:
    """The matches of _ASSIGNED in `text`, as `_ASSIGNED.finditer` finds them, tried only at the
    name runs holding a secret-sounding word: scanning every position cost ~1 s per MB (a third of
    Django's cold index), this costs a substring search.

    A match's name is a run of name characters holding a secret word, so it starts where such a run
    starts. The runs are found from the words' literals (`str.find`, where a regex search for the
    words tried its alternation at every position: 0.25 of 0.28 s on Django); a run holding a
    literal but no word (`monkey`) is tried too and fails to match.
    """
    lowered = text.lower()
    if len(lowered) == len(text):
        starts = set()
        for literal in _SECRET_WORD_LITERALS:
            at = lowered.find(literal)
            while at >= 0:
                starts.add(_name_run_start(text, at))
                at = lowered.find(literal, at + len(literal))
        candidates = sorted(starts)
    else:  # a character whose lower case is longer (e.g. U+0130) moves positions: search the text
        candidates = [_name_run_start(text, word.start()) for word in _SECRET_WORD_ANY_CASE.finditer(text)]
    matches: list[re.Match] = []
    position = 0
    tried: set[int] = set()
    for start in candidates:
        if start < position or start in tried:
            continue
        tried.add(start)
        match = _ASSIGNED.match(text, start)
        if match is not None:
            matches.append(match)
            position = match.end()
    return matches


def _name_run_start(text: str, at: int) -> int:
    """Where the run of name characters holding position `at` starts."""
    while at > 0 and text[at - 1] in _NAME_CHARS:
        at -= 1
    return at


def _on_lines_holding(text: str, marker: str, rewrite: Callable[[str], str]) -> str:
    """`text` with `rewrite` applied to each line holding `marker`, the other lines untouched.

    Equal to rewriting the whole text when what `rewrite` substitutes never spans a line break and
    looks at nothing beyond its line (the URL pattern: no match holds a line break, and `\\b` at a
    line's start sees the break before it as a non-word). Django's 17 MB has "://" on ~1% of its
    lines: scanning only those took the URL pass from 0.14 s to a few ms.
    """
    at = text.find(marker)
    if at < 0:
        return text
    pieces: list[str] = []
    done = 0  # text[:done] is in pieces
    while at >= 0:
        line_start = text.rfind("\n", 0, at) + 1
        line_end = text.find("\n", at)
        if line_end < 0:
            line_end = len(text)
        pieces.append(text[done:line_start])
        pieces.append(rewrite(text[line_start:line_end]))
        done = line_end
        at = text.find(marker, line_end)
    pieces.append(text[done:])
    return "".join(pieces)


def shannon_entropy(text: str) -> float:
    """Bits per character of `text`'s character distribution."""
    if not text:
        return 0.0
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


_WORDS = re.compile(r"[a-z]+(?:[-_. ][a-z]+)*")  # "production-database-password": words, not a key
_HEX = re.compile(r"[0-9a-fA-F]+")
HEX_ENTROPY_DISCOUNT = 0.5  # bits: a hex string's alphabet caps its entropy at 4 (detect-secrets: 3.0 vs 4.5)


def _looks_random(value: str, min_length: int, min_entropy: float) -> bool:
    if len(value) < min_length or value.startswith(("$", "{", "%", "<")) or value == MASK:
        return False  # placeholders: ${VAR}, {var}, %(var)s, <your-key>
    if _WORDS.fullmatch(value):
        return False
    threshold = min_entropy - HEX_ENTROPY_DISCOUNT if _HEX.fullmatch(value) else min_entropy
    return shannon_entropy(value) >= threshold


def mask_secrets(text: str, min_length: int = 12, min_entropy: float = 3.5) -> tuple[str, int]:
    """`text` with every secret replaced by MASK, and how many were replaced."""
    found = 0

    def keep_lines(match: re.Match) -> str:
        nonlocal found
        found += 1
        body = match["body"]
        inner = "\n".join(MASK if line.strip() else line for line in body.split("\n"))
        return match.group(0).replace(body, inner, 1)

    text = _PRIVATE_KEY.sub(keep_lines, text)

    def provider(match: re.Match) -> str:
        nonlocal found
        found += 1
        return MASK

    if any(literal in text for literal in _PROVIDER_KEY_LITERALS):
        text = _PROVIDER_KEYS.sub(provider, text)

    def url(match: re.Match) -> str:
        nonlocal found
        if match["secret"] == MASK:
            return match.group(0)
        found += 1
        return match["head"] + MASK

    text = _on_lines_holding(text, "://", lambda line: _URL_PASSWORD.sub(url, line))

    def assigned(match: re.Match) -> str:
        nonlocal found
        value = match["secret"]
        if not _looks_random(value, min_length, min_entropy):
            return match.group(0)
        found += 1
        start, end = match.span("secret")
        whole = match.group(0)
        offset = match.start()
        return whole[: start - offset] + MASK + whole[end - offset :]

    pieces: list[str] = []
    position = 0
    for match in assignments(text):
        pieces.append(text[position:match.start()])
        pieces.append(assigned(match))
        position = match.end()
    pieces.append(text[position:])
    return "".join(pieces), found
