"""Secrets inside code are found by shape and masked, keeping line breaks."""

from __future__ import annotations

import pytest

from repomem.index.secrets import MASK, mask_secrets, shannon_entropy

# Planted values: shaped like real credentials, valid for nothing.
AWS_ID = "AKIA" + "Q3EXAMPLE7Z2KXMPLE"[:16]
GITHUB = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
STRIPE = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
OPENAI = "sk-live-" + "Zx81QpLm29VbNc74TyRu0Ws5"
GOOGLE = "AIza" + "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"
JWT = "eyJhbGciOiJIUzI1NiJ9." + "eyJzdWIiOiIxMjM0NTY3ODkwIn0." + "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
RANDOM = "9fK2pX7qLmN4vB8wR1tY6zH3"


@pytest.mark.parametrize("line, secret", [
    (f'AWS_ACCESS_KEY_ID = "{AWS_ID}"', AWS_ID),
    (f"token = '{GITHUB}'", GITHUB),
    (f"stripe.api_key = {STRIPE!r}", STRIPE),
    (f'API_KEY = "{OPENAI}"', OPENAI),
    (f"maps = Client(key='{GOOGLE}')", GOOGLE),
    (f"headers = {{'Authorization': 'Bearer {JWT}'}}", JWT),
    (f'DATABASE_URL = "postgres://admin:{RANDOM}@db.internal:5432/app"', RANDOM),
    (f'client_secret = "{RANDOM}"', RANDOM),
    (f'"password": "{RANDOM}",', RANDOM),
    (f"DB_PASSWORD: str = '{RANDOM}'", RANDOM),
])
def test_secret_shapes_are_masked(line: str, secret: str):
    masked, count = mask_secrets(line)
    assert secret not in masked and MASK in masked and count == 1, masked
    assert mask_secrets(masked) == (masked, 0)  # masking is idempotent


@pytest.mark.parametrize("line", [
    'password = "changeme"',  # short, low entropy: a placeholder
    'API_KEY = os.environ["API_KEY"]',  # no literal
    'token = "${GITHUB_TOKEN}"',  # a template variable
    'secret_name = "production-database-password"',  # words, not random
    'def get_token(self, key: str) -> str:',
    'skip = "sk-" + name',
    'url = "https://example.com/path:8080@x"',
])
def test_ordinary_code_is_left_alone(line: str):
    assert mask_secrets(line) == (line, 0)


def test_a_private_key_block_keeps_its_line_count():
    text = "KEY = '''\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow" + "A" * 60 + "\nQ2xhc3M" + "B" * 60 + \
        "\n-----END RSA PRIVATE KEY-----\n'''\nx = 1\n"
    masked, count = mask_secrets(text)
    assert count == 1 and masked.count("\n") == text.count("\n")
    assert "MIIEow" not in masked and "Q2xhc3M" not in masked and masked.endswith("x = 1\n")


def test_entropy():
    assert shannon_entropy("aaaa") == 0.0 and shannon_entropy("ab") == 1.0
    assert shannon_entropy(RANDOM) > 4.0


def test_assignments_found_from_secret_words_equal_a_scan_of_every_position():
    """The fast path (search the words, try the name run holding each) finds exactly what
    `_ASSIGNED.finditer` finds trying every position, on code with many near misses."""
    from repomem.index.secrets import _ASSIGNED, assignments

    text = "\n".join([
        'API_KEY = "Zq8kL2vN9xR4aB3d"', "x.token_value: str = 'aB3dE5fG7hJ9kL1m'",
        '"client_secret": "9f8e7d6c5b4a3f2e"',
        "password_hint = 'not here'", "my-password=>'s3cr3t-V4lue-X9q'", "tokens = count_tokens(text)",
        "İstanbul PASSWORD = 'Zq8#kL2$vN9@xR4!'", "secretsecret_token='abcABC123xyzXYZ9'",
        'passwd = "a" + "b"', "credential:'x1y2z3w4v5u6t7s8' # token = 'q1w2e3r4t5y6u7i8'",
        "access-key := 'AAAAbbbbCCCCdddd'", "pwd", "auth_key =", "private_key = '''",
        "a.b.c.secret = 'X9y8Z7w6V5u4T3s2'",
    ] * 3)
    assert [m.span() for m in assignments(text)] == [m.span() for m in _ASSIGNED.finditer(text)]
    assert len(assignments(text)) >= 24


def spellings(pattern: str) -> set[str]:
    """Every string a regex of literals, alternations, groups, character sets and ? matches."""
    import re._parser as parser  # noqa: PLC0415 (the standard library's own regex parser)

    def expand(items) -> set[str]:
        out = {""}
        for op, value in items:
            name = str(op)
            if name == "LITERAL":
                options = {chr(value)}
            elif name == "IN":
                options = {chr(v) for kind, v in value if str(kind) == "LITERAL"}
            elif name == "SUBPATTERN":
                options = expand(value[-1])
            elif name == "BRANCH":
                options = set().union(*(expand(branch) for branch in value[1]))
            elif name == "MAX_REPEAT" and value[:2] == (0, 1):
                options = {""} | expand(value[2])
            else:
                raise AssertionError(f"not a finite pattern: {name}")
            out = {head + tail for head in out for tail in options}
        return out

    return expand(parser.parse(pattern))


def test_every_secret_word_holds_one_of_the_literals_the_scan_looks_for():
    from repomem.index.secrets import _SECRET_WORD, _SECRET_WORD_LITERALS

    words = spellings(_SECRET_WORD)
    assert {"api_key", "apikey", "password", "passwd", "pwd", "access-key"} <= words and len(words) == 18
    assert [word for word in words if not any(literal in word for literal in _SECRET_WORD_LITERALS)] == []


def test_every_provider_key_shape_holds_one_of_its_literals():
    """The literal prefilter skips a file holding none of them: each shape's matches must hold one
    (every spelling of each shape's fixed head, planted as a key)."""
    import re

    from repomem.index.secrets import _PROVIDER_KEY_SHAPES, _PROVIDER_KEYS

    planted = {
        "(?:A3T": ["A3TX" + "A" * 16, "AKIA" + "B" * 16, "ASIA" + "C" * 16, "ABIA" + "2" * 16, "ACCA" + "Z" * 16],
        "gh[": [f"gh{kind}_" + "a1" * 18 for kind in "pousr"], "github_pat_": ["github_pat_" + "x" * 60],
        "glpat-": ["glpat-" + "y" * 20], "xox[": [f"xox{kind}-" + "z" * 10 for kind in "abposr"],
        "(?:sk|rk|pk)": [f"{a}_{b}_" + "q" * 16 for a in ("sk", "rk", "pk") for b in ("live", "test")],
        "sk-ant-": ["sk-ant-" + "w" * 20], "sk-(?:": ["sk-" + "v" * 20, "sk-proj-" + "v" * 20],
        "AIza": ["AIza" + "u" * 35], "hf_": ["hf_" + "t" * 30], "npm_": ["npm_" + "s" * 36],
        "pypi-": ["pypi-AgEIcHlwaS5vcmc" + "r" * 50], "eyJ": ["eyJ" + "a" * 10 + ".eyJ" + "b" * 10 + "." + "c" * 10],
    }
    for literals, shape in _PROVIDER_KEY_SHAPES:
        samples = next(keys for start, keys in planted.items() if shape.startswith(start))
        for key in samples:
            assert re.fullmatch(shape, key) and _PROVIDER_KEYS.search(f"x = '{key}'"), key
            assert any(literal in key for literal in literals), (key, literals)
