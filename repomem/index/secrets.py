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

MASK = "[REDACTED]"

# Whole-token secrets recognisable by their prefix and alphabet.
_PROVIDER_KEYS = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}"  # AWS access key id
    r"|gh[pousr]_[A-Za-z0-9]{36,255}"  # GitHub tokens
    r"|github_pat_[A-Za-z0-9_]{60,255}"
    r"|glpat-[A-Za-z0-9_-]{20,}"  # GitLab
    r"|xox[abposr]-[A-Za-z0-9-]{10,}"  # Slack
    r"|(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}"  # Stripe
    r"|sk-ant-[A-Za-z0-9_-]{20,}"  # Anthropic
    r"|sk-(?:proj-|live-|test-)?[A-Za-z0-9_-]{20,}"  # OpenAI and look-alikes
    r"|AIza[0-9A-Za-z_-]{35}"  # Google API key
    r"|hf_[A-Za-z0-9]{30,}"  # Hugging Face
    r"|npm_[A-Za-z0-9]{36}"  # npm
    r"|pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}"  # PyPI upload token
    r"|eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"  # JSON Web Token
    r")(?![A-Za-z0-9])"
)
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
# Searched in lower-cased text: Python's re is ~8x slower with IGNORECASE on an alternation.
_SECRET_WORD_LOWER = re.compile(_SECRET_WORD)
_SECRET_WORD_ANY_CASE = re.compile(_SECRET_WORD, re.IGNORECASE)
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


def assignments(text: str) -> list[re.Match]:
    """The matches of _ASSIGNED in `text`, as `_ASSIGNED.finditer` finds them, tried only at the
    name runs holding a secret-sounding word: scanning every position cost ~1 s per MB (a third of
    Django's cold index), this costs a word search."""
    matches: list[re.Match] = []
    position = 0
    tried: set[int] = set()
    lowered = text.lower()
    # Lower-casing keeps positions unless a character's lower case is longer (e.g. U+0130).
    words = _SECRET_WORD_LOWER.finditer(lowered) if len(lowered) == len(text) else _SECRET_WORD_ANY_CASE.finditer(text)
    for word in words:
        start = word.start()
        while start > 0 and text[start - 1] in _NAME_CHARS:
            start -= 1
        if start < position or start in tried:
            continue
        tried.add(start)
        match = _ASSIGNED.match(text, start)
        if match is not None:
            matches.append(match)
            position = match.end()
    return matches


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

    text = _PROVIDER_KEYS.sub(provider, text)

    def url(match: re.Match) -> str:
        nonlocal found
        if match["secret"] == MASK:
            return match.group(0)
        found += 1
        return match["head"] + MASK

    if "://" in text:
        text = _URL_PASSWORD.sub(url, text)

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
