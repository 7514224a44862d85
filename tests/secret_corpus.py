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
    # split by a `/` and a `+` for sure (where the token scanner's runs end)
    "aws-secret-slashed": lambda rng: f"{_pick(rng, BASE64, 12)}/{_pick(rng, BASE64, 13)}+{_pick(rng, BASE64, 13)}",
    # a longer key whose runs between `/` and `+` are long enough to be looked at
    "base64-slashed-long": lambda rng: f"{_pick(rng, BASE62, 24)}/{_pick(rng, BASE62, 24)}+{_pick(rng, BASE62, 20)}",
    # a password holding the other quote mark ("...'...")
    "password-with-quote": lambda rng: _pick(rng, PASSWORD, 10) + "'" + _pick(rng, PASSWORD, 10),
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
    "docker-config-b64": lambda rng: base64.b64encode(json.dumps({"auths": {"registry.example.com": {
        "auth": base64.b64encode(f"ci:{_pick(rng, BASE62, 20)}".encode()).decode()}}}).encode()).decode(),
    # look-alikes
    "uuid": lambda rng: str(uuid.UUID(int=rng.getrandbits(128), version=4)),
    "sha1": lambda rng: _pick(rng, "0123456789abcdef", 40),
    "sha256": lambda rng: _pick(rng, "0123456789abcdef", 64),
    "md5": lambda rng: _pick(rng, "0123456789abcdef", 32),
    "sha512-integrity": lambda rng: "sha512-" + base64.b64encode(rng.randbytes(64)).decode(),
    "go-sum": lambda rng: "h1:" + base64.b64encode(rng.randbytes(32)).decode(),
    "png-data-uri": lambda rng: "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n" + rng.randbytes(90))
    .decode(),
    "ssh-public-key": lambda rng: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI" + base64.b64encode(rng.randbytes(32)).decode()
    .rstrip("="),
    "certificate-body": lambda rng: _pem_body(rng),
    "sri-sha384": lambda rng: "sha384-" + base64.b64encode(rng.randbytes(48)).decode(),
    "uuid-upper": lambda rng: str(uuid.UUID(int=rng.getrandbits(128), version=4)).upper(),
}
ALPHABETS = {"base62": BASE62, "hex": "0123456789abcdef", "base64": BASE64, "password": PASSWORD}

# Provider token formats, as the issuers document them: `{alphabet:n}` is n characters drawn from
# FORMAT_ALPHABETS. Each is a kind of value (the third word of a placeholder).
FORMAT_ALPHABETS = {
    "b62": BASE62, "b64u": BASE62 + "-_", "hex": "0123456789abcdef", "HEX": "0123456789ABCDEF",
    "d": string.digits, "U": string.ascii_uppercase, "Ud": string.ascii_uppercase + string.digits,
    "ld": string.ascii_lowercase + string.digits, "aws": string.ascii_uppercase + "234567",
    "bech": "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", "ah": "abcdefgh0123456789",
}
FORMATS: dict[str, str] = {
    "aws-id-no-digit": "AKIA{U:16}",
    "github-oauth": "gho_{b62:36}", "github-user": "ghu_{b62:36}", "github-server": "ghs_{b62:36}",
    "github-refresh": "ghr_{b62:36}",
    "gitlab-runner": "glrt-{b64u:20}", "gitlab-deploy": "gldt-{b64u:20}", "gitlab-trigger": "glptt-{hex:40}",
    "gitlab-feed": "glft-{b64u:20}", "gitlab-mail": "glimt-{ld:25}", "gitlab-job": "glcbt-{b64u:20}",
    "gitlab-oauth": "gloas-{hex:64}", "gitlab-registration": "GR1348941{b64u:20}",
    "slack-user": "xoxp-{d:12}-{d:12}-{d:13}-{hex:32}", "slack-app": "xapp-1-A{Ud:10}-{d:13}-{hex:64}",
    "slack-refresh": "xoxe-1-{Ud:140}", "slack-config": "xoxe.xoxp-1-{b62:140}",
    "stripe-restricted": "rk_live_{b62:24}", "stripe-test": "sk_test_{b62:24}", "stripe-webhook": "whsec_{b62:32}",
    "sendgrid": "SG.{b64u:22}.{b64u:43}",
    "shopify-access": "shpat_{hex:32}", "shopify-secret": "shpss_{hex:32}", "shopify-custom": "shpca_{hex:32}",
    "digitalocean-pat": "dop_v1_{hex:64}", "digitalocean-oauth": "doo_v1_{hex:64}",
    "digitalocean-refresh": "dor_v1_{hex:64}",
    "google-oauth-access": "ya29.{b64u:120}", "google-client-secret": "GOCSPX-{b64u:28}",
    "telegram": "{d:10}:AA{b64u:33}", "twilio": "SK{hex:32}", "databricks": "dapi{hex:32}",
    "age": "AGE-SECRET-KEY-1{bech:58}", "mailgun": "key-{hex:32}", "mailchimp": "{hex:32}-us{d:1}",
    "pypi": "pypi-AgEIcHlwaS5vcmc{b64u:70}", "huggingface-org": "api_org_{b62:34}",
    "openai-service": "sk-svcacct-{b64u:60}", "groq": "gsk_{b62:52}", "replicate": "r8_{b62:37}",
    "linear": "lin_api_{b62:40}", "notion": "secret_{b62:43}", "notion-ntn": "ntn_{b62:46}",
    "atlassian": "ATATT3{b64u:180}", "postman": "PMAK-{hex:24}-{hex:34}", "doppler": "dp.pt.{b62:43}",
    "pulumi": "pul-{hex:40}", "terraform": "{b62:14}.atlasv1.{b64u:67}", "vault": "hvs.{b64u:90}",
    "vault-batch": "hvb.{b64u:120}", "sentry-org": "sntrys_eyJ{b64u:120}", "sentry-user": "sntryu_{hex:64}",
    "grafana-cloud": "glc_{b62:40}", "grafana-service": "glsa_{b62:32}_{hex:8}", "new-relic": "NRAK-{Ud:27}",
    "dynatrace": "dt0c01.{Ud:24}.{Ud:64}", "heroku": "HRKU-AA{b64u:58}", "fly": "fo1_{b64u:43}",
    "netlify": "nfp_{b62:36}", "supabase": "sbp_{hex:40}", "planetscale": "pscale_tkn_{b64u:43}",
    "planetscale-password": "pscale_pw_{b64u:43}", "mapbox": "sk.eyJ{b64u:60}.{b64u:22}",
    "square": "EAAA{b64u:60}", "square-oauth": "sq0csp-{b64u:43}", "shippo": "shippo_live_{hex:40}",
    "discord-bot": "M{b62:23}.{b64u:6}.{b64u:27}", "alibaba": "LTAI{b62:20}", "tencent": "AKID{b62:32}",
    "figma": "figd_{b64u:40}", "facebook": "EAAC{b62:120}", "adobe": "p8e-{b62:32}",
    "contentful": "CFPAT-{b64u:43}", "airtable": "pat{b62:14}.{hex:64}", "prefect": "pnu_{b62:36}",
    "rubygems": "rubygems_{hex:48}", "clojars": "CLOJARS_{ld:60}", "docker-hub": "dckr_pat_{b64u:27}",
    "jfrog": "AKCp{b62:69}", "octopus": "API-{Ud:26}", "easypost": "EZAK{b62:54}",
    "flutterwave": "FLWSECK-{ah:32}-X", "bitbucket": "ATBB{b62:32}", "buildkite": "bkua_{hex:40}",
    "duffel": "duffel_live_{b64u:43}", "readme": "rdme_{ld:70}", "brevo": "xkeysib-{hex:64}-{b62:16}",
    "typeform": "tfp_{b64u:59}", "infracost": "ico-{b62:32}", "nuget": "oy2{ld:43}",
    "openshift": "sha256~{b64u:43}", "scalingo": "tk-us-{b64u:48}", "yandex": "y0_{b64u:55}",
    "cloudflare-ca": "v1.0-{hex:24}-{hex:146}", "azure-ad": "{b62:3}8Q~{b64u:34}",
    "harness": "pat.{b62:22}.{hex:24}.{b62:20}", "lob": "live_{hex:35}", "frameio": "fio-u-{b64u:64}",
    # Issuers no rule names: a prefix, a separator and a random body (the prefixed-token rule).
    "unlisted-live": "acme_live_{b62:32}", "unlisted-short": "zq-{b62:40}", "unlisted-dotted": "wkr.{b62:36}",
    "unlisted-pat": "forge-pat-{b62:36}", "unlisted-hex": "tool_{hex:48}", "unlisted-two-part": "vx1_{b62:8}_{b62:30}",
    "unlisted-upper": "ZEPH-{Ud:32}", "unlisted-mixed": "tk_{b64u:44}",
    # look-alikes
    "hex32": "{hex:32}", "git-short": "{hex:10}", "docker-digest": "sha256:{hex:64}",
    "webpack-asset": "main.{hex:20}.js", "pip-hash": "--hash=sha256:{hex:64}",
    "stripe-object-id": "cus_{b62:14}", "semver-build": "1.2.{d:3}+build.{d:6}",
    "snowflake-id": "{d:19}", "isbn-like": "978-{d:10}", "html-color": "#{hex:6}",
}
_FORMAT_FIELD = re.compile(r"\{(\w+):(\d+)\}")


def _from_format(fmt: str, rng: random.Random) -> str:
    return _FORMAT_FIELD.sub(lambda field: _pick(rng, FORMAT_ALPHABETS[field[1]], int(field[2])), fmt)


def generate(kind: str, rng: random.Random) -> str:
    if kind in KINDS:
        return KINDS[kind](rng)
    if kind in FORMATS:
        return _from_format(FORMATS[kind], rng)
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


WORD_STRETCH = re.compile(r"[a-z_.-]+")  # an issuer's prefix (`secret_a…`, `rubygems`): in ordinary text too


class HeardText:
    """What a model server heard, searched for secret stretches: the text whole, and its lines once
    each. Requests repeat most of their lines (the same blocks in many prompts, JSON bodies with
    escaped newlines), so a stretch is looked for in the distinct pieces, not in every copy.

    Exact: the pieces are the text's lines, also cut at each escaped newline (`\\n`, kept at the end
    of the piece before and the start of the piece after), so a stretch holding neither a newline
    nor an escaped one lies inside one piece wherever it occurs; a stretch that holds an escaped
    newline is looked for in the whole text."""

    def __init__(self, text: str) -> None:
        self.whole = text
        pieces: set[str] = set()
        for line in text.split("\n"):
            parts = line.split("\\n")
            last = len(parts) - 1
            pieces.update(("\\n" if number else "") + part + ("\\n" if number < last else "")
                          for number, part in enumerate(parts))
        self.distinct = "\n".join(pieces)

    def __contains__(self, stretch: str) -> bool:
        if "\n" in stretch:
            return stretch in self.whole
        return stretch in (self.whole if "\\n" in stretch else self.distinct)


def leaked(value: str, text: str | HeardText) -> bool:
    """Whether any LEAK_WINDOW-character stretch of `value` (of each of its lines) is in `text`; a
    stretch of lower-case letters alone (a token's prefix, `secret_a`) tells nothing and is skipped."""
    for line in value.split("\n"):
        width = min(LEAK_WINDOW, len(line))
        if any(line[i:i + width] in text and not WORD_STRETCH.fullmatch(line[i:i + width])
               for i in range(len(line) - width + 1)):
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
