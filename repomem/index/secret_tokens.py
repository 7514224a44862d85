"""Secrets that are whole tokens: a provider's key shape, or any prefixed token whose body is random.

A credential issued by a service is one run of token characters (`glrt-…`, `xapp-1-…`, `SG.….…`,
`dop_v1_…`, `123456789:AA…`). Rather than search the whole text once per provider (Python's regex
engine tries an alternation at every position: ~0.7 s for 17 MB, whatever the pattern), the text's
runs of token characters at least MIN_RUN long that hold a digit and a letter are found by byte
translation and substring search (`candidate_runs`), and only those few runs are matched against:

- PROVIDER_SHAPES, one rule per issuer with its published prefix and alphabet (written for repomem
  from the providers' own documentation of their token formats; the gitleaks and secretlint rule
  sets were read to learn which providers exist), and
- the prefixed-token rule, for issuers nobody listed: a short prefix (2 to 12 characters, starting
  with a letter) and a separator, then a body of at least GENERIC_BODY characters that looks random
  (letters and digits mixed, no word-long letter runs, high entropy). Hashes with an algorithm's
  prefix (`sha512-…` in lock files, `h1:…` in go.sum, `sha256:…` image digests) are left alone.

Two rules read past a run, where base64's `/` and `+` split a key into runs: an AWS key id's run
followed by another argument of 40 base64 characters (the secret access key passed by position),
and a run that fails every rule but stands inside a quoted argument widened over base64 symbols
(`argument_literal` then judges the whole literal). A run found is masked whole; line breaks never
occur inside one, so lines do not move.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter

# Token characters: letters, digits and the separators issuers put inside tokens (`_-.:~`).
TOKEN_CHARACTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.:~"
MIN_RUN = 20  # characters: the shortest provider token (Twilio's SK + 32 hex is 34; SendGrid's parts 22)
GENERIC_BODY = 20  # characters of a prefixed token's body, separators not counted
GENERIC_PREFIX = re.compile(r"[A-Za-z][A-Za-z0-9]{1,11}(?:[._~-][A-Za-z0-9]{1,4})?[._~-]")  # `acme_live_`
# Prefixes of hashes and digests, not secrets: integrity fields, go.sum, image digests, checksums.
# (`xn--` starts a punycode label of an internationalised host name.)
HASH_PREFIXES = re.compile(r"(?i)(?:sha\d*|md5|h1|blake2[bs]?|sha3|xxh\d*|crc32|git|commit|rev|id|uuid|xn-)[._:~-]")

_ALNUM = "A-Za-z0-9"
_LETTERS_ONLY_HEADS = re.compile(r"A(?:3T|KIA|SIA|BIA|CCA)")  # shapes whose tokens may hold no digit
# (issuer, shape). Each shape is searched inside a run, bounded by non-alphanumerics.
PROVIDER_SHAPES: tuple[tuple[str, str], ...] = (
    ("aws", r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}"),
    ("github", r"gh[pousr]_[A-Za-z0-9]{36,255}"),
    ("github-fine-grained", r"github_pat_[A-Za-z0-9_]{60,255}"),
    ("gitlab", r"gl(?:pat|rt|dt|ptt|ft|imt|cbt|oas|soat|ffct|agent)-[A-Za-z0-9_-]{20,}"),
    ("gitlab-runner-registration", r"GR1348941[A-Za-z0-9_-]{20,}"),
    ("slack", r"xox[abposre]-[A-Za-z0-9-]{10,}"),
    ("slack-app", r"xapp-\d-[A-Z0-9]+-\d+-[A-Za-z0-9]+"),
    ("stripe", r"(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}"),
    ("stripe-webhook", r"whsec_[A-Za-z0-9]{24,}"),
    ("sendgrid", r"SG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{16,64}"),
    ("shopify", r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"),
    ("digitalocean", r"do[opr]_v1_[a-f0-9]{64}"),
    ("google-oauth-access", r"ya29\.[A-Za-z0-9_-]{20,}"),
    ("google-oauth-client-secret", r"GOCSPX-[A-Za-z0-9_-]{28}"),
    ("google-api", r"AIza[0-9A-Za-z_-]{35}"),
    ("telegram-bot", r"\d{8,10}:AA[A-Za-z0-9_-]{33}"),
    ("twilio", r"SK[0-9a-fA-F]{32}"),
    ("databricks", r"dapi[a-f0-9]{32}(?:-\d)?"),
    ("age-identity", r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}"),
    ("mailgun", r"key-[0-9a-zA-Z]{32}"),
    ("mailchimp", r"[0-9a-f]{32}-us\d{1,2}"),
    ("npm", r"npm_[A-Za-z0-9]{36}"),
    ("pypi", r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}"),
    ("huggingface", r"(?:hf|api_org)_[A-Za-z0-9]{30,}"),
    ("anthropic", r"sk-ant-[A-Za-z0-9_-]{20,}"),
    ("openai", r"sk-(?:proj-|svcacct-|admin-|live-|test-)?[A-Za-z0-9_-]{20,}"),
    ("groq", r"gsk_[A-Za-z0-9]{48,}"),
    ("replicate", r"r8_[A-Za-z0-9]{37}"),
    ("linear", r"lin_(?:api|oauth)_[A-Za-z0-9]{40}"),
    ("notion", r"(?:secret|ntn)_[A-Za-z0-9]{40,}"),
    ("atlassian", r"ATATT3[A-Za-z0-9_=-]{100,}"),
    ("postman", r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}"),
    ("doppler", r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,44}"),
    ("pulumi", r"pul-[a-f0-9]{40}"),
    ("terraform-cloud", r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,}"),
    ("vault", r"hv[sbr]\.[A-Za-z0-9_-]{24,}"),
    ("sentry", r"sntry[su]_[A-Za-z0-9_=-]{40,}"),
    ("grafana", r"gl(?:c|sa)_[A-Za-z0-9_]{32,}"),
    ("new-relic", r"NR(?:AK|JS|II)-[A-Za-z0-9]{19,32}"),
    ("dynatrace", r"dt0c01\.[A-Z0-9]{24}\.[A-Z0-9]{64}"),
    ("heroku", r"HRKU-[A-Za-z0-9_-]{40,}"),
    ("fly", r"fo1_[A-Za-z0-9_-]{39,}"),
    ("netlify", r"nfp_[A-Za-z0-9]{36}"),
    ("supabase", r"sbp_[a-f0-9]{40}"),
    ("planetscale", r"pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_.-]{32,64}"),
    ("mapbox", r"[sp]k\.eyJ[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,}"),
    ("square", r"(?:EAAA[A-Za-z0-9_-]{60}|sq0(?:atp|csp)-[A-Za-z0-9_-]{22,43})"),
    ("shippo", r"shippo_(?:live|test)_[a-f0-9]{40}"),
    ("discord-bot", r"[MN][A-Za-z0-9]{23,25}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,38}"),
    ("alibaba", r"LTAI[A-Za-z0-9]{20}"),
    ("tencent", r"AKID[A-Za-z0-9]{32}"),
    ("figma", r"figd_[A-Za-z0-9_-]{40}"),
    ("facebook", r"EAA[CM][A-Za-z0-9]{80,}"),
    ("adobe", r"p8e-[A-Za-z0-9]{32}"),
    ("contentful", r"CFPAT-[A-Za-z0-9_-]{43}"),
    ("airtable", r"pat[A-Za-z0-9]{14}\.[a-f0-9]{64}"),
    ("prefect", r"pnu_[A-Za-z0-9]{36}"),
    ("rubygems", r"rubygems_[a-f0-9]{48}"),
    ("clojars", r"CLOJARS_[a-z0-9]{60}"),
    ("docker-hub", r"dckr_pat_[A-Za-z0-9_-]{27}"),
    ("jfrog", r"AKCp[A-Za-z0-9]{69}"),
    ("octopus", r"API-[A-Z0-9]{26}"),
    ("easypost", r"EZ[AT]K[A-Za-z0-9]{54}"),
    ("flutterwave", r"FLWSECK(?:_TEST)?-[a-h0-9]{32}-X"),
    ("bitbucket", r"ATBB[A-Za-z0-9_=.-]{32,}"),
    ("buildkite", r"bkua_[a-f0-9]{40}"),
    ("duffel", r"duffel_(?:test|live)_[A-Za-z0-9_=-]{43}"),
    ("readme", r"rdme_[a-z0-9]{70}"),
    ("brevo", r"xkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}"),
    ("typeform", r"tfp_[A-Za-z0-9_.=-]{59}"),
    ("infracost", r"ico-[A-Za-z0-9]{32}"),
    ("nuget", r"oy2[a-z0-9]{43}"),
    ("openshift", r"sha256~[A-Za-z0-9_-]{43}"),
    ("scalingo", r"tk-us-[A-Za-z0-9_-]{48}"),
    ("yandex", r"(?:y0_[A-Za-z0-9_-]{55}|AQVN[A-Za-z0-9_-]{35,38})"),
    ("cloudflare-origin-ca", r"v1\.0-[a-f0-9]{24}-[a-f0-9]{146}"),
    ("azure-ad-client-secret", r"[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.-]{31,34}"),
    ("harness", r"pat\.[A-Za-z0-9]{22}\.[a-f0-9]{24}\.[A-Za-z0-9]{20}"),
    ("lob", r"(?:live|test)_(?:pub_)?[a-f0-9]{35}"),
    ("frameio", r"fio-u-[A-Za-z0-9_=-]{64}"),
    ("json-web-token", r"eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"),
)
_PROVIDER = re.compile(rf"(?<![{_ALNUM}])(?:" + "|".join(f"(?P<p{i}>{shape})" for i, (_, shape)
                                                         in enumerate(PROVIDER_SHAPES)) + rf")(?![{_ALNUM}])")


def _first_characters(shape: str) -> str | None:
    """The characters a match of `shape` can start with, or None when any alphanumeric can."""
    head = re.match(r"\(\?:([^()]*?)\)|\[([^\]]*)\]|(\\d)|([A-Za-z0-9])", shape)
    if head is None:
        return None
    if head[1] is not None:  # an alternation whose options each start with a literal: (?:sk|rk|pk)
        options = head[1].split("|")
        if not all(option[:1].isalnum() for option in options):
            return None
        return "".join(dict.fromkeys(option[0] for option in options))
    if head[2] is not None:
        members = head[2]
        if "A-Z" in members or "a-z" in members or "0-9" in members and len(members) > 3:
            return None
        return "".join(dict.fromkeys(re.sub(r"(.)-(.)", lambda r: "".join(map(chr, range(ord(r[1]), ord(r[2]) + 1))),
                                            members)))
    return "0123456789" if head[3] else head[4]


def _dispatch() -> tuple[dict[str, re.Pattern[str]], re.Pattern[str]]:
    """Per first character, one pattern of the shapes that can start with it; and one of the shapes
    that can start with any. A token starts where its run starts or after a separator inside it,
    so each run tries a few positions against a few shapes instead of every shape at every position."""
    by_character: dict[str, list[int]] = {}
    anywhere: list[int] = []
    for number, (_, shape) in enumerate(PROVIDER_SHAPES):
        first = _first_characters(shape)
        if first is None:
            anywhere.append(number)
            continue
        for character in first:
            by_character.setdefault(character, []).append(number)

    def compiled(numbers: list[int]) -> re.Pattern[str]:
        return re.compile("(?:" + "|".join(f"(?P<p{n}>{PROVIDER_SHAPES[n][1]})" for n in sorted(numbers))
                          + rf")(?![{_ALNUM}])")

    return ({character: compiled(numbers + anywhere) for character, numbers in by_character.items()},
            compiled(anywhere))


_SHAPES_BY_FIRST, _SHAPES_ANYWHERE = _dispatch()
_SEPARATOR = re.compile(r"[._:~-](?=[A-Za-z0-9])")


def provider_tokens(run: str) -> list[tuple[int, int, str]]:
    """(start, end, issuer) of each provider token in `run` (a run of token characters), leftmost
    first, not overlapping: what `_PROVIDER.finditer(run)` finds, tried only where a token can start."""
    found: list[tuple[int, int, str]] = []
    starts = [0] + [separator.end() for separator in _SEPARATOR.finditer(run)]
    if run.startswith("bot") and run[3:4].isdigit():  # Telegram's API URL: `/bot<token>/sendMessage`
        starts.insert(1, 3)
    done = 0
    for start in starts:
        if start < done:
            continue
        match = _SHAPES_BY_FIRST.get(run[start], _SHAPES_ANYWHERE).match(run, start)
        if match is not None:
            found.append((start, match.end(), PROVIDER_SHAPES[int(match.lastgroup[1:])][0]))
            done = match.end()
    return found


# Byte translation tables: whether a byte is a token
# character (1 or 0), and its kind (1 a digit, 2 an upper-case letter, 3 a lower-case one, 0 else).
_IS_TOKEN = bytes(int(chr(byte) in TOKEN_CHARACTERS) for byte in range(256))
_LONG_RUN = b"\x01" * MIN_RUN
# Adjacent characters of two kinds (digit, upper, lower): a random token changes kind every ~2
# characters (base62: 0.6 of its pairs, hex 0.47, one case and digits 0.4), words at their starts
# only (`ImproperlyConfigured`: 3 in 20, `0009_alter_user_name`: 0).
_MIXES = tuple(bytes((a, b)) for a in (1, 2, 3) for b in (1, 2, 3) if a != b)
MIN_MIXES = 4
MIX_SHARE = 0.12
_KIND = bytes(1 if chr(byte) in "0123456789" else 2 if chr(byte) in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
              else 3 if chr(byte) in "abcdefghijklmnopqrstuvwxyz" else 0 for byte in range(256))

_LETTER_RUNS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")
WORDLIKE_RUN_LETTERS = 3.5  # letters per run from which a body reads as words (repomem.index.secrets)
UPPER_WORDLIKE_RUN_LETTERS = 6.0  # the same for a body without lower case (random: 3.6)
MIN_SEGMENT = 12  # characters of a separator-free stretch that can hold a token body by itself
WORDY_RUN_LETTERS = 4.5  # a run of both cases reads as words from here (random base62: 1.7)
WORDY_ONE_CASE_RUN_LETTERS = 6.5  # one case and digits (random: 3.6; `0009_alter_user_last_name`: 4.3)


def _paired_literal(secret: str) -> re.Pattern[str]:
    """The next argument after a quoted literal that ends where the match starts, when it is a
    literal of `secret` (a regex) in quotes: `"<key id>", "<secret>"`."""
    return re.compile(rf"""(["'`])\s*,\s*(["'`])(?P<secret>{secret})\2""")


# After an AWS key id's literal: the next argument, a literal of 40 base64 characters.
_AWS_PAIRED_SECRET = _paired_literal("[A-Za-z0-9/+]{40}")
# Twilio's auth token passed after its account SID (`Client("AC<32 hex>", "<32 hex>")`): 32 hex
# alone reads as a digest, so only its place after the SID tells it.
_TWILIO_ACCOUNT_SID = re.compile(r"AC[0-9a-f]{32}")
_TWILIO_PAIRED_TOKEN = _paired_literal("[0-9a-f]{32}")
BASE64_LITERAL_MAX = 200  # characters a run is widened by each way over base64 symbols (a key is 40)
_BASE64 = frozenset(string.ascii_letters + string.digits + "+/")
ARGUMENT_ENTROPY = 3.9  # bits per character of an unnamed argument literal (random base62 of 20: 4.1 +- 0.15)
MIN_HEX_GENERIC_BODY = 32  # hex characters of an unlisted prefixed token's body (content hashes run 8-20)
DIGEST_HEX_LENGTHS = frozenset({32, 40, 56, 64, 96, 128})  # md5, sha1, sha224, sha256, sha384, sha512
_SEGMENT_SEPARATORS = re.compile(r"[._:~-]")
_FILE_EXTENSION = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,4}$")  # `main.3f2a….js`: a file name
MIN_BODY_ENTROPY = 3.3  # bits per character of a random body of 20 (base62 draws: 4.0 on average)
MIN_HEX_BODY_ENTROPY = 3.0  # a hex body's alphabet caps it at 4 (hex draws of 20+: 3.7 on average)


def candidate_runs(text: str) -> list[tuple[int, int]]:
    """(start, end) of every run of TOKEN_CHARACTERS at least MIN_RUN long whose characters change
    kind (digit, upper case, lower case) from one to the next often enough for a token drawn at
    random (`mixes`), or that holds an AWS key id's head, in `text`'s own character positions.

    The text is translated to one byte per character, 1 for a token character and 0 for any other
    (bytes.translate runs at memory speed); a run at least MIN_RUN long holds MIN_RUN ones in a row,
    which bytes.find skips to (Python's stdlib, 19 MB: 50,000 such runs in 0.13 s, where a regex
    tried every position in 0.7 s)."""
    if len(text) < MIN_RUN:
        return []
    # One byte per character: a character outside ASCII becomes "?", no token character.
    data = text.encode("ascii") if text.isascii() else text.encode("ascii", "replace")
    token = data.translate(_IS_TOKEN)
    kinds = data.translate(_KIND)
    runs: list[tuple[int, int]] = []
    at = token.find(_LONG_RUN)
    while at >= 0:  # `at` is where a run of at least MIN_RUN token characters starts
        end = token.find(b"\x00", at)
        end = len(token) if end < 0 else end
        # (bytes.find and count with bounds: no slice is copied)
        upper, digit = kinds.find(b"\x02", at, end) >= 0, kinds.find(b"\x01", at, end) >= 0
        if upper and not digit and kinds.find(b"\x03", at, end) < 0:  # upper case alone: an AWS key id at most
            if _LETTERS_ONLY_HEADS.search(text, at, end):
                runs.append((at, end))
        elif upper or digit:  # lower case alone changes kind nowhere
            mixes = sum(kinds.count(pair, at, end) for pair in _MIXES)
            if mixes >= max(MIN_MIXES, MIX_SHARE * (end - at)) or (upper and _LETTERS_ONLY_HEADS.search(text, at, end)):
                runs.append((at, end))
        at = token.find(_LONG_RUN, end)
    return runs


def entropy(value: str) -> float:
    """Shannon entropy of `value`'s characters, bits per character."""
    counts = Counter(value)
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


def random_body(body: str) -> bool:
    """Whether a token's body (separators taken out) looks drawn at random: long enough, letters
    and digits mixed, no word-long letter runs, and a high entropy for its alphabet."""
    if len(body) < GENERIC_BODY or not (any(c.isdigit() for c in body) and any(c.isalpha() for c in body)):
        return False
    runs = _LETTER_RUNS.findall(body)
    # Upper case and digits alone (36 characters) run 3.6 letters on average between digits.
    wordlike = WORDLIKE_RUN_LETTERS if any(c.islower() for c in body) else UPPER_WORDLIKE_RUN_LETTERS
    if runs and sum(map(len, runs)) / len(runs) >= wordlike:
        return False
    if sum(c.isdigit() for c in body) > 0.8 * len(body):  # dates, serial numbers, version stamps
        return False
    hex_only = all(c in "0123456789abcdefABCDEF" for c in body)
    return entropy(body) >= (MIN_HEX_BODY_ENTROPY if hex_only else MIN_BODY_ENTROPY)


def prefixed_token(run: str) -> tuple[int, int] | None:
    """The span of a prefixed token with a random body inside `run`, or None. The prefix is the
    run's first segment (or the first after a dotted or path-like head is skipped: `config.glrt-…`
    is not how a token is written, so only the run's start is tried)."""
    prefix = GENERIC_PREFIX.match(run)
    if prefix is None:
        return None
    rest = run[prefix.end():]
    segments = _SEGMENT_SEPARATORS.split(rest)
    if max(map(len, segments)) < 16 or HASH_PREFIXES.match(run) or _FILE_EXTENSION.search(run):
        return None
    # A dotted or joined name ending in a digest (`template.cache.a.fragment.<md5>`): words after the prefix.
    if any(len(segment) >= 4 and _reads_as_words(segment) for segment in segments):
        return None
    body = "".join(segments)
    if not random_body(body):
        return None
    longest = max(segments, key=len)
    if all(c in "0123456789abcdefABCDEF" for c in longest) and (
            len(longest) < MIN_HEX_GENERIC_BODY or len(longest) in DIGEST_HEX_LENGTHS):
        return None
    return 0, len(run)


def token_secrets(text: str) -> list[tuple[int, int, str]]:
    """(start, end, issuer) of each token secret in `text`, in order, not overlapping; the issuer
    is "prefixed-token" for the generic rule."""
    found: list[tuple[int, int, str]] = []
    for start, end in candidate_runs(text):
        if start and text[start - 1] == "\\":  # an escape's letter (`\\n` in JSON, a string) starts no token
            start += 1
        run = text[start:end]
        if wordy(run) and not _LETTERS_ONLY_HEADS.search(run):
            continue
        tokens = provider_tokens(run)
        if tokens:
            found += [(start + a, start + b, issuer) for a, b, issuer in tokens]
            if tokens[-1][2] == "aws" and tokens[-1][1] == end - start:
                # The secret access key passed after its key id (`NewStaticCredentials("AKIA…",
                # "<key>", "")`, Java's `BasicAWSCredentials`): 40 of base64, whose `/` and `+`
                # split it into runs too short to be looked at.
                paired = _AWS_PAIRED_SECRET.match(text, end)
                if paired is not None and random_body(re.sub(r"[/+]", "", paired["secret"])):
                    found.append((*paired.span("secret"), "aws"))
            continue
        span = prefixed_token(run)
        if span is not None:
            found.append((start + span[0], start + span[1], "prefixed-token"))
        elif argument_literal(text, start, end):
            found.append((start, end, "argument-literal"))
        elif text[start - 1:start] in ("/", "+") or text[end:end + 1] in ("/", "+"):
            # A base64 key split into runs at its `/` and `+` (AWS's secret access key passed by
            # position: `NewStaticCredentials("AKIA…", "<40 of base64>", "")`): the literal whole.
            low, high = _base64_literal(text, start, end)
            if (low, high) != (start, end) and argument_literal(text, low, high, base64=True):
                if found and found[-1][0] >= low:  # an earlier run of the same literal was taken
                    found.pop()
                found.append((low, high, "argument-literal"))
        if _TWILIO_ACCOUNT_SID.fullmatch(run):
            paired = _TWILIO_PAIRED_TOKEN.match(text, end)
            if paired is not None:
                found.append((*paired.span("secret"), "twilio"))
    return _without_overlaps(found)


def _base64_literal(text: str, start: int, end: int) -> tuple[int, int]:
    """text[start:end] widened over the base64 characters beside it (`/`, `+`, letters, digits,
    and `=` at the end), at most BASE64_LITERAL_MAX characters each way."""
    low = start
    while low > 0 and start - low < BASE64_LITERAL_MAX and text[low - 1] in _BASE64:
        low -= 1
    high = end
    while high < len(text) and high - end < BASE64_LITERAL_MAX and text[high] in _BASE64:
        high += 1
    while high < len(text) and text[high] == "=" and high - end < BASE64_LITERAL_MAX:
        high += 1
    return low, high


def _without_overlaps(found: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """`found` (in order of start) with each span that starts inside the one before it dropped."""
    kept: list[tuple[int, int, str]] = []
    for span in found:
        if kept and span[0] < kept[-1][1]:
            continue
        kept.append(span)
    return kept


def wordy(run: str) -> bool:
    """Whether `run`'s letters come in word-long runs, so that no token can be in it: what most
    identifiers, dotted names and file names are (`ImproperlyConfigured`, `settings.INSTALLED_APPS`).
    Lenient where a token's alphabet has one case (lower case and digits run 3.6 letters on average)."""
    if not _reads_as_words(run):
        return False
    # A prefix word (`CLOJARS_`) can make a run read as words that holds a random segment.
    return all(len(segment) < MIN_SEGMENT or _reads_as_words(segment) for segment in _SEGMENT_SEPARATORS.split(run))


def _reads_as_words(text: str) -> bool:
    runs = _LETTER_RUNS.findall(text)
    if not runs:
        return False
    one_case = text.upper() == text or text.lower() == text
    return sum(map(len, runs)) / len(runs) >= (WORDY_ONE_CASE_RUN_LETTERS if one_case else WORDY_RUN_LETTERS)


def argument_literal(text: str, start: int, end: int, base64: bool = False) -> bool:
    """Whether text[start:end] is a whole quoted literal passed as an argument with no name to say
    what it is (`connect(host, user, "<password>")`, `jwt.sign(claims, "<key>")`) whose characters
    look drawn at random: letters of both cases and digits, no word-long runs, high entropy."""
    quote = text[start - 1:start]
    if quote not in ('"', "'", "`") or text[end:end + 1] != quote:
        return False
    before = text[max(0, start - 40):start - 1].rstrip()
    after = text[end + 1:end + 40].lstrip()
    if not (before.endswith(("(", ",")) and after.startswith((",", ")"))):
        return False
    value = text[start:end]
    if not (any(c.isupper() for c in value) and any(c.islower() for c in value) and any(c.isdigit() for c in value)):
        return False
    if base64:  # the base64 alphabet's own symbols are no separators; a path has word-long parts
        if not any(c in value for c in "/+") or any(_reads_as_words(part) for part in re.split(r"[/+=]", value)
                                                   if len(part) >= 4):
            return False
        value = re.sub(r"[/+=]", "", value)
    return not any(c in value for c in "._:~") and random_body(value) and entropy(value) >= ARGUMENT_ENTROPY
