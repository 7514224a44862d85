"""Secrets inside code: found by their shape and masked before anything is indexed or sent to a model.

File-name patterns (config.ScanConfig.secret_patterns) keep `.env` files and keys out, and
`secret_file_reason` the files that are credentials by their content, whatever their name (read
after a byte-order mark, with fields apart by blanks or tabs). This catches the secrets written into
other files:

- whole tokens (repomem.index.secret_tokens): 81 issuers' token shapes, any prefixed token whose
  body looks random, and a random literal passed as an unnamed argument;
- private-key blocks (with or without their END line), a PuTTY key's private lines, a private key
  encoded in base64 whole (`LS0tLS1CRUdJTi…`, decoded to check), a JSON Web Key's private members
  (`d`, `p`, `q`, `dp`, `dq`, `qi`, `k`; a public key's modulus is left), written as JSON or YAML,
  the values under a Kubernetes Secret's `data:` / `stringData:` wherever its manifest is (a Helm
  template, a file's second document, an object written as JSON);
- passwords in URLs (any case of scheme), tokens as a URL's user, signatures and tokens in a
  query (SAS `sig=`, presigned URLs), Go's MySQL DSN, MySQL's glued `-pPASSWORD` (`-p'...'`), webhook URLs
  (Slack, Discord, Microsoft Teams), a registry login's `auth` value (base64 of `user:password`);
- `Authorization` credentials (Bearer, Basic, token; `curl -u user:password`, `-uuser:password`), and values given to
  secret-sounding names whose characters look random (Shannon entropy per character). Such a value
  is found assigned, as a mapping entry, after a flag (`--password VALUE`), in prose (`the api key
  is VALUE`), netrc-style (`password<TAB>VALUE`), in a container's environment (`name: API_TOKEN` /
  `value: ...`), or as the default of an environment look-up (`os.getenv("API_KEY", "...")`,
  `env.TOKEN || "..."`), as a YAML block scalar (`secret: |` and each line of the block), C's
  `#define API_KEY "..."`, an XML element or named value
  (`<password>...</password>`, `<add key="ApiKey" value="..."/>`, Spring's `<property name="password"
  value="..."/>`), SQL's `IDENTIFIED BY '...'`, `WITH PASSWORD '...'`, `ALTER USER u PASSWORD '...';`,
  `SET PASSWORD FOR u = '...'`, `sshpass -p '...'`, a registry login's `docker login -p ...` (podman,
  buildah, skopeo, `helm registry login`), PowerShell's `ConvertTo-SecureString '...'` (and `'...' |
  ConvertTo-SecureString`),
  a call its name says takes one (`ds.setPassword("...")`, `NetworkCredential("user", "...")`, `auth=("user", "...")`);
  quoted in any string form
  of the indexed languages (triple-quoted, prefixed `b"`/`f"`/`r"`, C#'s `@"..."` and `$"..."`,
  Swift's `#"..."#`, Lua's long brackets `[[...]]` and `[==[...]==]`, backticked, JSON-escaped as a
  notebook holds code, parenthesised, concatenated; holding the other quote marks) or unquoted
  (shell `export`, YAML, INI, .properties, a DSN's `password=...`, comments); a literal not closed
  at its line's end under a name whose last word says secret (`password = "x`) is a value being
  typed, masked however short;
- such values told by their place: in a multiple assignment (`user, password = "app", "..."`,
  `(db_user, db_pass) = (...)`, `const [user, token] = [...]`, Go's `:=`, Lua's `local`, Perl's
  `my (...)`), and the password passed by position to a call its name says logs in or connects
  (`ftp.login("user", "...")`, `connect(host, "root", "...")`). Short passwords of words and digits
  (`"hunter2"`) are left in every shape, named or placed, as their entropy leaves them: by shape
  they are test fixtures (`create_user("john", "j@example.com", "pass")`), and no common scanner
  flags them without a name to go on.

The secret is replaced by `[REDACTED]`; line breaks are kept, so line numbers, windows and cursors
do not move. Whatever the cursor's file is, its text reaches a prompt (and a server's tokenizer)
only through this masking.

tests/data/secrets holds the corpus that measures what this catches and what it must leave alone
(tests/unit/test_secret_corpus.py; scripts/bench_secrets.py adds real repositories).
"""

from __future__ import annotations

import base64
import math
import re
import string
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable
from itertools import accumulate

from repomem.index.secret_tokens import random_body, token_secrets

MASK = "[REDACTED]"

_PRIVATE_KEY = re.compile(
    r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----(?P<body>.*?)-----END[A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----",
    re.DOTALL,
)
# A private key block whose END line is missing (cut when pasted): its BEGIN line, then the lines
# that look like its body (base64, or `Proc-Type: ...` headers) up to the first that does not.
_PRIVATE_KEY_OPEN = re.compile(
    r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----[^\n]*\n"
    r"(?P<body>(?:[ \t]*(?:[A-Za-z0-9+/=]{16,}|[A-Za-z][\w-]*:[^\n]*)[ \t\r]*(?:\n|$))+)"
)
# A PuTTY key's private part: `Private-Lines: N` and the N lines after it.
_PUTTY_PRIVATE_LINES = re.compile(r"Private-Lines:[ \t]*(?P<count>\d{1,4})[ \t\r]*\n")
# The user may be empty: `redis://:password@host`; schemes in any case (`POSTGRES://`). A password
# may hold "@" unescaped (`postgres://app:p@ss…@db/app`): it ends at the last "@" before the host.
_URL_PASSWORD = re.compile(r"(?i)(?P<head>\b[a-z][a-z0-9+.-]*://[^/\s:@'\"]*:)(?P<secret>[^/\s'\"]{3,})"
                           r"(?=@[^/\s@'\"?#]*(?:[/\s'\"?#]|$))")
# A token as a URL's user name, no password: `https://<40 hex>@github.com/...` (checked for randomness).
# (Sentry's DSN holds its public key there, public by design: `https://<32 hex>@o1.ingest.sentry.io`.)
_URL_TOKEN_USER = re.compile(r"(?P<head>://)(?P<secret>[A-Za-z0-9_.~-]{20,})(?=(?::[^/\s@'\"]*)?@(?![\w.-]*sentry))")
# MySQL's clients take the password glued to -p: `mysqldump -uapp -pS3cr3t db`, `-p'S3cr3t'`.
_MYSQL_GLUED_PASSWORD = re.compile(r"(?P<head>\b(?:mysql|mysqldump|mysqladmin|mariadb|mariadb-dump)\b"
                                   r"[^\n]*?[ \t]-p[\"']?)(?P<secret>[^\s'\"`;|&]{4,})")
# Signed URLs and SAS tokens: the signature (and a token or key) in the query.
_SIGNED_QUERY = re.compile(r"(?i)(?P<head>[?&;](?:sig|signature|x-amz-signature|x-goog-signature|x-amz-security-token"
                           r"|access_token|client_secret|api_?key|token|code)=)(?P<secret>[^&#\s'\"<>]{16,})")
# Go's database DSN, user:password@tcp(host:port)/name, has no scheme.
_GO_DSN_PASSWORD = re.compile(r"(?P<head>(?<![\w.-])[\w.-]+:)(?P<secret>[^\s@'\"/:]{3,})(?=@tcp\()")
# Webhook URLs whose path is the credential (Slack's services, workflows and triggers, Discord,
# Microsoft Teams' incoming webhooks, whose path holds "@"); they hold "://", as URL passwords do.
_WEBHOOK_PATH = re.compile(r"(?P<head>://(?:hooks\.slack\.com/(?:services|workflows|triggers)"
                           r"|discord(?:app)?\.com/api/webhooks|[\w-]+\.webhook\.office\.com/webhookb2"
                           r"|outlook\.office(?:365)?\.com/webhook)/)(?P<secret>[A-Za-z0-9_/@-]{20,})")
# A private key encoded in base64 whole (a Kubernetes Secret's `tls.key`, a CI variable):
# "-----BEGIN" encodes to this at the start of the data; the decoded head must name a private key.
_BASE64_PEM_HEAD = "LS0tLS1CRUdJTi"
_BASE64_PEM = re.compile(r"LS0tLS1CRUdJTi[A-Za-z0-9+/]*={0,2}"
                         r"(?:[ \t]*\r?\n[ \t]*[A-Za-z0-9+/]{16,}={0,2}(?![^\s\"'`,;]))*")  # wrapped lines
# A registry login as Docker's config (`"auth": "<base64 of user:password>"`), npm's `_auth=`, pasted
# into a file that is no config (a README, a test): the value must decode to `user:password`.
# (The pattern starts with its literal, which the regex engine skips to; what precedes is checked apart.)
_BASIC_AUTH_VALUE = re.compile(r"auth[\"']?[ \t]*[:=][ \t]*[\"']?"
                               r"(?P<secret>[A-Za-z0-9+/]{12,}={0,2})(?![A-Za-z0-9+/=])")

# Names that sound secret: a run of name characters holding one of these words (`DB_PASS`,
# `aws_secret_access_key`, `apiKey`, `--password`, `spring.datasource.password`).
_SECRET_WORD = (r"(?:(?:api|app|auth|access|account|private|signing|encryption|master|client|license|storage)"
                r"[_-]?key|key(?![a-z])|secret|token|pass|pwd|credential|dockerconfigjson|dockercfg)")
# key(?![a-z]): STRIPE_KEY, not keys
_NAME_CHAR = "A-Za-z0-9_.-"
# A run of name characters holding a secret word, the whole run: the word found by a lookahead, the
# run taken without giving any back. `[NAME]*WORD[NAME]*` backtracked through every occurrence of
# the word in the run: quadratic on one long run (a 20 KB `passwordpassword...` took seconds).
_NAME_HOLDING_WORD = rf"(?=[{_NAME_CHAR}]*?{_SECRET_WORD})[{_NAME_CHAR}]*+"
# A string literal of the indexed languages, or of JSON holding code (a notebook's `\"`). Its content
# holds no blank nor backslash (a value with a blank is a sentence, not a key) nor its own quote
# mark; the other marks it may hold (a password with a quote in it, `"ab'c..."`).
_QUOTE_MARKS = ('"""', "'''", '"', "'", "`", '\\"', "\\'", "\\`")


def _content(mark: str) -> str:
    """A literal's content between `mark`s (an escaped mark's content holds no backslash anyway)."""
    if len(mark) == 1 or mark.startswith("\\"):
        return rf"[^{re.escape(mark[-1]) if len(mark) == 1 else ''}\s\\]+"
    return rf"(?:(?!{re.escape(mark)})[^\s\\])+"


# Lua's long brackets (`[[...]]`, `[==[...]==]`): written out for each level, as a pattern used
# several times in one regex can hold no back-reference.
_LONG_BRACKET_LEVELS = 4
_LONG_BRACKETS = tuple(("[" + "=" * level + "[", "]" + "=" * level + "]") for level in range(_LONG_BRACKET_LEVELS + 1))
# Before a literal's quote: Python's string prefixes, C#'s verbatim and interpolated `@"..."`,
# `$"..."`, `$@"..."` (and shell's `$'...'`), Swift's raw `#"..."#`, whose closing `#`s a literal
# takes too.
_PREFIX = r"(?:[rbuf]{0,2}|[@$]{1,2}|#{1,3})"
_QUOTED = _PREFIX + "(?:" + "|".join(f"{re.escape(mark)}{_content(mark)}{re.escape(mark)}"
                                     for mark in _QUOTE_MARKS) + "|" + "|".join(
    rf"{re.escape(open_)}(?:(?!{re.escape(close)})[^\s\\])+{re.escape(close)}" for open_, close in _LONG_BRACKETS) \
    + ")#{0,3}"
_LITERAL = re.compile(
    "(?i)" + _PREFIX + "(?:(?P<open>" + "|".join(map(re.escape, _QUOTE_MARKS))
    + r")(?P<content>(?:(?!(?P=open))[^\s\\])+)(?P=open)"
    + r"|\[(?P<level>=*)\[(?P<long>(?:(?!\](?P=level)\])[^\s\\])+)\](?P=level)\])#{0,3}"
)


def _content_span(literal: re.Match) -> tuple[int, int]:
    """Where a _LITERAL match's text lies between its quotes or its long brackets."""
    return literal.span("content" if literal["open"] is not None else "long")


# Blanks, or a backslash continuing the line (`password = \` then the value on the next line).
_GAP = r"(?>(?:\s|\\(?=\r?\n))*)"
_JOINER = re.compile(rf"{_GAP}\+?{_GAP}")  # between concatenated literals: `"a" + "b"`, Python's `"a" "b"`
_SEPARATOR = (
    # a YAML block scalar (`client_secret: |` or `>-`, the value on the next, indented line)
    r"(?:\\?['\"]?[ \t]*:[ \t]*(?P<block>[|>])[+-]?[1-9]?[+-]?[ \t]*\r?\n[ \t]+(?=\S)"
    r"|\\?['\"]?\)?\s*(?:\|\||\?\?|or(?=\s))"  # env.NAME || "value", getenv("NAME") or "value"
    # assigned (a type annotation allowed: Rust's `&str`, `&'static str` too), a mapping entry, a
    # subscript (`config["password"] =`, `os.environ["DB_PASS"] =`), a shell default ${NAME:-value}
    r"|\\?['\"]?(?:\[\]|\])?(?:\s*:\s*&?(?:'[a-z_]+\s+)?[A-Za-z_][\w\[\]., |]*?)?\s*(?::=|:-|=>|=|:)"
    r"|[ \t]+\([^()\n]{1,40}\):"  # a remark in a comment: `# old api key (rotated in May): ...`
    r"|['\"]?[ \t]*\n[ \t]*value[ \t]*:"  # a container's environment: `- name: API_TOKEN` / `value: ...`
    r"|[ \t]+(?:is|was|are)[ \t]+(?:now[ \t]+)?"  # prose in a comment: `# the prod api key is ...`
    r"|[ \t]+(?=[^\s=:'\"`(])"  # netrc and flags: `password<TAB>value`; a bare value must still look random
    r"""|\\?["'][ \t]+value[ \t]*="""  # a named value in XML: `<add key="ApiKey" value="..."/>`
    r")"
)
# A call its name says takes a secret (`ds.setPassword("...")`, `new NetworkCredential("user",
# "...")`, Java's `new PasswordAuthentication("user", "...".toCharArray())`): the second of two
# literal arguments, else the first. The word ends the called name's last part or a word of it
# (`setApiKey`, `PasswordAuthentication`, not `AutoTokenizer.from_pretrained` nor `tokenizer`); a
# key alone is no secret's (`models.ForeignKey("MiXedCaseApp.owner", ...)`, `PublicKey(...)`).
_CALL_WORD = (r"(?:password|passwd|passphrase|pwd|secret|token|credential"
              r"|(?:api|app|auth|access|account|private|signing|encryption|master|client|license|storage)[_-]?key)")
_SECRET_CALL = (rf"(?P<call>(?:[{_NAME_CHAR}]*\.)?\w*{_CALL_WORD}(?-i:(?![a-z]))\w*)\("
                rf"(?:\s*{_QUOTED}\s*,(?=\s*{_QUOTED}\s*[).]))?")
# A login given as (user, password) to what the name says authenticates: `HTTPBasicAuth("user", "...")`,
# `auth=("user", "...")`, `session.auth = ("user", "...")`: the second literal.
_AUTH_PAIR = rf"(?P<auth>[{_NAME_CHAR}]*auth)(?![{_NAME_CHAR}])\s*=?\s*\(\s*{_QUOTED}\s*,(?=\s*{_QUOTED}\s*\))"
# A match is a name (or a credential scheme) and what gives it its value; the value is only looked
# at (a lookahead), so a value that is no secret (`process.env.TOKEN || "..."`) is searched on.
_ASSIGNED = re.compile(
    rf"(?i)(?<![{_NAME_CHAR}])(?:"  # names start where a run of name characters starts (the leftmost match)
    r"""(?:(?P<scheme>bearer|basic|token)(?:[ \t]+(?!(?:is|was|are)[ \t])|[ \t]*["'`]\s*\+\s*["'`])"""  # Bearer ..."
    r"""|(?P<login>-u[ \t=]*|--user[ \t=]+)["']?[\w.@-]++:)"""  # curl -u user:password, -uuser:password
    r"(?=(?P<credential>[A-Za-z0-9._~+/-]+=*))"
    # before a name's rule, which would take the word after the name for its value: MySQL's `SET
    # PASSWORD FOR user = '...'`, sshpass's `-p '...'` (its flags before), PowerShell's
    # `ConvertTo-SecureString '...' -AsPlainText` (or `-String '...'`, its switches before)
    r"|(?:(?P<sql_set>(?<=set[ \t])password[ \t]+for[ \t]+[^\s=]++[ \t]*+=[ \t]*+)"
    r"|(?P<sshpass>sshpass(?:[ \t]+-[a-oq-z]\w*+)*+[ \t]+(?-i:-p)[ \t]*+)"
    r"|(?P<securestring>convertto-securestring(?:[ \t]+-(?:asplaintext|force)(?![\w-]))*+(?:[ \t]+-string)?[ \t]++)"
    # a registry login's `-p VALUE` (`docker login -u user -p ...`; podman's, buildah's, skopeo's, `helm
    # registry login`): `-p` alone is too common a flag (`docker run -p 8080:80`, `ssh -p 22`), so it
    # counts among a login command's words alone, a few of them, on its line, before `;`, `|` or `&`
    r"|(?P<registry>(?:(?<=(?<![\w.-])docker[ \t])|(?<=(?<![\w.-])podman[ \t])|(?<=(?<![\w.-])buildah[ \t])"
    r"|(?<=(?<![\w.-])skopeo[ \t])|(?<=(?<![\w.-])helm[ \t]registry[ \t]))login"
    r"(?:[ \t]++[^\s;|&]++){0,12}?[ \t]++(?-i:-p)(?=[ \t=\"'])=?[ \t]*+)"
    rf"|(?P<name>{_NAME_HOLDING_WORD})(?![{_NAME_CHAR}]){_SEPARATOR}"
    # the default of a look-up, the name its first argument: getenv("NAME", "value"), get('name', 'value')
    r"""|(?:(?<=\(["'])|(?<=\(\\["']))"""
    rf"""(?P<lookup>(?=[\w.-]*?{_SECRET_WORD})[\w.-]*+)(?![{_NAME_CHAR}])\\?["']\s*,"""
    rf"|(?P<flag>-{_NAME_HOLDING_WORD})(?![{_NAME_CHAR}])[ \t]+"  # --password VALUE
    rf"|{_AUTH_PAIR}|{_SECRET_CALL}"
    rf"|(?<=<)(?P<element>{_NAME_HOLDING_WORD})>"  # XML: <password>VALUE</password>
    # C's `#define API_KEY "..."` (a name then a blank and a quote elsewhere is too often the end
    # of a string: `"Invalid token " + ...`)
    r"|(?:" + "|".join(rf"(?<=#{indent}define[ \t]{{{blanks}}})" for indent in ("", "[ \t]")
                       for blanks in range(1, 5)) + ")"  # lookbehinds have one width each
    rf"(?P<define>{_NAME_HOLDING_WORD})[ \t]+(?=[\"'])"
    # SQL: MySQL's `IDENTIFIED [WITH plugin] BY '...'`, PostgreSQL's `WITH [LOGIN] PASSWORD '...'`
    r"|(?P<sql>identified[ \t]+(?:with[ \t]+\w+[ \t]+)?by(?:[ \t]+password)?"
    r"|(?:(?<=with[ \t])|(?<=login[ \t])|(?<=encrypted[ \t]))password"
    # PostgreSQL's `ALTER USER app PASSWORD '...';`: a single-quoted literal ending the statement
    r"|(?<=[ \t])password(?=[ \t]+'[^'\s\\]+'[ \t]*(?:;|\r?\n|$)))[ \t]+)"
    rf"(?={_GAP}\(?\s*(?P<quoted>{_QUOTED}(?:{_GAP}\+?{_GAP}{_QUOTED})*)"  # quoted, parenthesised, concatenated
    # a literal not closed yet at the line's end: a value being typed, the cursor after it (an
    # editor's buffer, which goes to the model at every keystroke)
    r"""|[ \t]*[rbuf@$]{0,2}["'`](?P<unclosed>[^\s'"`\\]+)[ \t]*(?=\r?\n|\Z)"""
    r"""|[ \t]*(?P<bare>[^\s'"`,;(){}\[\]<>\\]+)))"""  # unquoted: shell, YAML, INI, DSN, comments
)
# The words' literals are ASCII: lower-casing ASCII letters alone finds them and keeps every position.
_ASCII_LOWER_CASE = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


# Every match of _SECRET_WORD holds one of the first six (the *key words: "key"), every credential
# scheme one of "bearer", "basic", "token", a (user, password) pair's name "auth", SQL's
# "identified", PowerShell's "convertto-securestring", a registry login's "login"; a test checks
# each spelling of the words.
_SECRET_WORD_LITERALS = ("key", "secret", "token", "pass", "pwd", "credential", "dockerc", "bearer", "basic", "-u",
                         "auth", "identified", "convertto-securestring", "login")
# A login call's name and its parenthesis (_LOGIN_CALL), looked for apart: each literal is one more
# pass over the text (docs/measurements.md#secret-masking-cost), so rarer words (`logon`, `signin`)
# are not.
_LOGIN_LITERALS = ("login(", "connect(")
# Literals that only count where they end a name (`auth=(...)`, `HTTPBasicAuth(...)`): tried where
# they merely start one (`django.contrib.auth.models`, `authenticate`), they cost a fifth more of
# Django's masking, for no match.
_NAME_END_LITERALS = frozenset({"auth"})


def lower_case(text: str) -> str:
    """`text` in lower case, each character where it was."""
    lowered = text.lower()
    if len(lowered) != len(text):  # a character whose lower case is longer (U+0130) would move positions
        lowered = text.translate(_ASCII_LOWER_CASE)
    return lowered


def name_run_starts(text: str, literals: tuple[str, ...] = _SECRET_WORD_LITERALS, lowered: str | None = None,
                    ) -> list[int]:
    """Where the runs of name characters holding one of `literals` start, in order (a literal of
    _NAME_END_LITERALS counts where it ends a run); `lowered` is `lower_case(text)` if known."""
    if lowered is None:
        lowered = lower_case(text)
    starts = set()
    for literal in literals:
        ends_name = literal in _NAME_END_LITERALS
        known, known_start = 0, 0  # the last occurrence whose run start is known, and that start
        at = lowered.find(literal)
        while at >= 0:
            after = at + len(literal)
            if not ends_name or after == len(text) or text[after] not in _NAME_CHARS:
                known_start = _name_run_start(text, at, known, known_start)
                known = at
                starts.add(known_start)
            at = lowered.find(literal, after)
    return sorted(starts)


def assignments(text: str, starts: list[int] | None = None) -> list[re.Match]:
    """The matches of _ASSIGNED in `text`, as `_ASSIGNED.finditer` finds them, tried only at the
    name runs holding a secret-sounding word: scanning every position cost a share of a cold index
    (docs/measurements.md#secret-masking-cost), this costs a substring search.

    `starts` are `name_run_starts(text)` where known. A match's name is a run of name characters
    holding a secret word, so it starts where such a run starts. The runs are found from the words'
    literals (`str.find`, where a regex search for the words tried its alternation at every
    position, most of the time); a run holding a literal but no word (`monkey`) is tried too and
    fails to match.
    """
    candidates = name_run_starts(text) if starts is None else starts
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


def _name_run_start(text: str, at: int, known: int = 0, known_start: int = 0) -> int:
    """Where the run of name characters holding position `at` starts. `known` (before `at`) is a
    position whose run starts at `known_start`: a walk back that reaches it is in the same run, so
    it stops there (a long run holding a word many times was walked back once per occurrence)."""
    while at > known and text[at - 1] in _NAME_CHARS:
        at -= 1
    return known_start if at == known and known > 0 else at


def _on_lines_holding(text: str, marker: str, rewrite: Callable[[str], str]) -> str:
    """`text` with `rewrite` applied to each line holding `marker`, the other lines untouched.

    Equal to rewriting the whole text when what `rewrite` substitutes never spans a line break and
    looks at nothing beyond its line (the URL pattern: no match holds a line break, and `\\b` at a
    line's start sees the break before it as a non-word). Few lines hold "://", so scanning only
    those makes the URL pass cheap (docs/measurements.md#secret-masking-cost).
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
_DASHED_HEX = re.compile(r"[0-9a-fA-F]{4,}(?:-[0-9a-fA-F]{4,})+")
HEX_ENTROPY_DISCOUNT = 0.5  # bits: a hex string's alphabet caps its entropy at 4 (detect-secrets: 3.0 vs 4.5)
# Letter runs split where the case changes (`getApiToken` is get, Api, Token; `HTTPServer` is HTTP, Server).
_LETTER_RUNS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")
# Letters per run from which a value reads as words (an identifier, a path, a host name): random
# characters change case or turn to a digit every ~2 characters (24 of base62: 1.7 on average,
# under 3 in 999 of 1000 draws), English words run 5 to 8.
WORDLIKE_RUN_LETTERS = 3.5
# Letters and digits of one case alone (`x7kq2m9…`, `Q4ZP8N…`): 36 characters, whose letters run 3.6
# on average between digits, often past 3.5; words glued to digits (`base64encoded`) run longer.
_ONE_CASE_ALNUM = re.compile(r"[a-z0-9]+|[A-Z0-9]+")
ONE_CASE_WORDLIKE_RUN_LETTERS = 6.5


def _looks_random(value: str, min_length: int, min_entropy: float) -> bool:
    if len(value) < min_length or value.startswith(("$", "{", "%", "<")) or MASK in value:
        return False  # placeholders: ${VAR}, {var}, %(var)s, <your-key>; a masked value
    if _WORDS.fullmatch(value):
        return False
    # hex, or hex in dashed groups (a UUID-shaped key: Heroku's, npm's older tokens)
    hex_only = _HEX.fullmatch(value) or _DASHED_HEX.fullmatch(value)
    threshold = min_entropy - HEX_ENTROPY_DISCOUNT if hex_only else min_entropy
    return shannon_entropy(value) >= threshold


def reads_as_words(value: str) -> bool:
    """Whether `value`'s letters come in word-long runs (`settings.API_TOKEN_V2`, `/run/secrets/db`)."""
    runs = _LETTER_RUNS.findall(value)
    if not runs:
        return False
    one_case = _ONE_CASE_ALNUM.fullmatch(value) and any(c.isdigit() for c in value)
    return sum(map(len, runs)) / len(runs) >= (ONE_CASE_WORDLIKE_RUN_LETTERS if one_case else WORDLIKE_RUN_LETTERS)


def _unquoted_secret(value: str, following: str, min_length: int, min_entropy: float) -> bool:
    """An unquoted value is a secret when it looks random and is no code: not a call nor an
    index (`env("KEY")`, `os.environ["KEY"]`), not a URL (the URL pattern finds its password), not
    words (`self.api_key`, `settings.SECRET_KEY`), and holding a letter and a digit (a random
    value of 12 or more characters lacks either once in ~100 draws: base62 digits are 1 in 6)."""
    if following in ("(", "[") or "://" in value or reads_as_words(value):
        return False
    if not (any(c.isdigit() for c in value) and any(c.isalpha() for c in value)):
        return False
    return _looks_random(value, min_length, min_entropy)


def _quoted_secret(value: str, min_length: int, min_entropy: float) -> bool:
    """A quoted value (its literals joined) is a secret when it looks random and is neither a URL
    (the URL pattern finds its password) nor words (`/run/secrets/db_password`, `DATE_INPUT_FORMATS`,
    `tuner:elapsed_secs`: a password made of words is left, as its entropy would leave it)."""
    if "://" in value or reads_as_words(value):
        return False
    return _looks_random(value, min_length, min_entropy)


# A literal passed to a call that holds these is code (a pattern, a template: `_create_tag_line_token(
# r"((?:[nN]…|…))")`), not a password.
_CODE_MARKS = frozenset("()[]{}|<>")


def masked_assignment(match: re.Match, min_length: int, min_entropy: float) -> tuple[int, str] | None:
    """Where the value `match` (of _ASSIGNED) looks at ends, and the text from the match's start to
    there with the secret masked; None when the value is no secret. Each literal of a concatenation
    is masked; quotes, joiners and line breaks stay."""
    text = match.string
    called = match["call"] is not None or match["auth"] is not None
    if called and match["bare"] is not None:
        return None  # a call's argument that is no literal: a variable
    if match["credential"] is not None:
        value, spans = match["credential"], [match.span("credential")]
        if reads_as_words(value) or not _looks_random(value, min_length, min_entropy):
            return None
    elif match["unclosed"] is not None:
        spans = [match.span("unclosed")]
        if _typed_under_secret_name(match):
            pass  # a value being typed: however few of its characters are there yet, they are the secret's
        elif not _quoted_secret(match["unclosed"], min_length, min_entropy) \
                or called and any(c in match["unclosed"] for c in _CODE_MARKS):
            return None
    elif match["bare"] is not None:
        spans = [match.span("bare")]
        following = text[spans[0][1]:spans[0][1] + 1]
        if not _unquoted_secret(match["bare"], following, min_length, min_entropy):
            return None
    else:
        spans = []
        position, end = match.span("quoted")
        while position < end:
            literal = _LITERAL.match(text, position)
            assert literal is not None  # _ASSIGNED matched these literals one after another
            spans.append(_content_span(literal))
            position = _JOINER.match(text, literal.end()).end()
        value = "".join(text[a:b] for a, b in spans)
        if not _quoted_secret(value, min_length, min_entropy) or called and any(c in value for c in _CODE_MARKS):
            return None
    if match["block"] is not None:
        spans = _block_scalar_lines(text, match.start("name"), spans[0][0])
    pieces = []
    position = match.start()
    for start, end in spans:
        pieces += [text[position:start], MASK]
        position = end
    return position, "".join(pieces)


# A name that says its value is a secret: its last word is one (`DB_PASSWORD`, `apiKey`,
# `settings.SECRET_KEY`, `--password`), not merely holds one (`key`, `token_type`, `secret_name`).
_SECRET_NAME_END = re.compile(rf"(?:(?i:{_CALL_WORD}|secret[_-]?key|secrets|credentials)"
                              r"|(?i:(?<![a-z])pass)|(?<=[a-z])Pass)\Z")
# A placeholder being typed (`"${DB_PASS`, `f"{settings.`), as _looks_random leaves them whole.
_PLACEHOLDER_HEADS = ("$", "{", "%", "<")


def _typed_under_secret_name(match: re.Match) -> bool:
    """Whether `match` (of _ASSIGNED) gives a literal not closed at its line's end (a value being
    typed: an editor's buffer reaches the model at every keystroke) to what says it takes a secret:
    a name or flag ending in a secret word, or SQL, sshpass or PowerShell's password shapes.
    Whatever was typed of it is then masked, however short (a closed literal must still look
    random: short ones are fixtures, `password="test"`)."""
    value = match["unclosed"]
    if value.startswith(_PLACEHOLDER_HEADS) or MASK in value:
        return False
    if match["sql"] is not None or match["sql_set"] is not None or match["sshpass"] is not None \
            or match["securestring"] is not None or match["registry"] is not None:
        return True
    name_group = "name" if match["name"] is not None else "flag" if match["flag"] is not None else "define"
    name = match[name_group]
    if name is None or _SECRET_NAME_END.search(name[-32:]) is None:  # its words are shorter
        return False
    # A name inside a literal (`prompt="Password: "):`): the quote after it closes that literal.
    text, (start, end) = match.string, match.span(name_group)
    if start and text[start - 1] in _QUOTES and text[end:end + 1] == text[start - 1]:
        start -= 1  # the name's own quotes: `"api_key": "...`
    return not _opens_literal(text, text.rfind("\n", 0, start) + 1, start)


_QUOTES = "\"'`"


def _opens_literal(text: str, start: int, end: int) -> bool:
    """Whether text[start:end] (part of a line) leaves a string literal open, its quotes paired as
    they come (a backslash escaping inside a literal): it is not literals and what lies between."""
    return _CLOSED_LITERALS.fullmatch(text, start, end) is None


_CLOSED_LITERALS = re.compile(r"""(?:[^"'`]++|"(?:[^"\\]++|\\.)*+"|'(?:[^'\\]++|\\.)*+'|`(?:[^`\\]++|\\.)*+`)*+""")


def _block_scalar_lines(text: str, name_start: int, value_start: int) -> list[tuple[int, int]]:
    """The spans of the content of a YAML block scalar's lines (`secret: |`, its key's name at
    `name_start`, its first line's value at `value_start`): that first line and each after it up to
    the first indented at or less than the key (blank lines inside it kept)."""
    line_start = text.rfind("\n", 0, name_start) + 1
    key = name_start - (name_start > line_start and text[name_start - 1] in "'\"")  # a quoted key
    key_column = key - line_start
    spans: list[tuple[int, int]] = []
    start = text.rfind("\n", 0, value_start) + 1
    while start <= len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        line = text[start:end]
        content = line.strip(" \t\r")
        if content:
            indent = len(line) - len(line.lstrip(" \t"))
            if spans and indent <= key_column:
                break
            spans.append((start + indent, start + indent + len(content)))
        start = end + 1
    return spans


# Several names given values at once, on one line from a statement's start: `user, password =
# "app", "..."`, `(db_user, db_pass) = (...)`, JavaScript's `let [user, token] = [...]`, Go's `:=`,
# Lua's `local a, b = ...`, Perl's `my ($user, $pass) = (...)`, Rust's `let (user, pass) = (...)`.
# Each value is the name's at the same place.
_TARGET = rf"[$@]?[{_NAME_CHAR}]+"
_MULTIPLE_ASSIGNMENT = re.compile(
    r"[ \t]*(?:(?:local|let|const|var|val|my|our)[ \t]+(?:mut[ \t]+)?)?[(\[]?[ \t]*"
    rf"(?P<targets>{_TARGET}(?:[ \t]*,[ \t]*{_TARGET})+)[ \t]*,?[ \t]*[)\]]?[ \t]*:?=(?![=>~])[ \t]*[(\[]?[ \t]*")
_SECRET_NAME = re.compile(rf"(?i)[$@]?{_NAME_HOLDING_WORD}")
# A value that is no literal masking could judge: a name, a number, a string with blanks or escapes.
_OTHER_VALUE = re.compile(r"""[\w.$@-]+|[rbuf@$]{0,2}(["'`])(?:\\.|(?!\1)[^\\\n])*\1""")
_VALUE_SEPARATOR = re.compile(r"[ \t]*,[ \t]*")


def line_starts(text: str, positions: list[int]) -> list[int]:
    """Where the lines holding `positions` (in order) start, each once."""
    starts: list[int] = []
    for position in positions:
        start = text.rfind("\n", 0, position) + 1
        if not starts or starts[-1] != start:
            starts.append(start)
    return starts


def multiple_assignment_secrets(text: str, starts: list[int], min_length: int, min_entropy: float,
                                ) -> list[tuple[int, int]]:
    """The spans of the secret literals given to secret-sounding names in a multiple assignment
    (_MULTIPLE_ASSIGNMENT) starting at one of the line `starts` (in order): each name's value is the
    literal at its place, judged as an assigned one is."""
    spans: list[tuple[int, int]] = []
    for start in starts:
        line_end = text.find("\n", start)
        line_end = len(text) if line_end < 0 else line_end
        comma = text.find(",", start, line_end)
        # names apart by "," come before the line's first "="
        if comma < 0 or text.find("=", start, comma) >= 0 or text.find("=", comma, line_end) < 0:
            continue
        match = _MULTIPLE_ASSIGNMENT.match(text, start)
        if match is None:
            continue
        names = [name.strip() for name in match["targets"].split(",")]
        if not any(_SECRET_NAME.fullmatch(name) for name in names):
            continue
        values: list[tuple[int, int] | None] = []  # the content of each literal; None for other values
        position = match.end()
        while len(values) < len(names):
            literal = _LITERAL.match(text, position)
            if literal is not None:
                values.append(_content_span(literal))
                position = literal.end()
            else:
                other = _OTHER_VALUE.match(text, position)
                if other is None:
                    break
                values.append(None)
                position = other.end()
            separator = _VALUE_SEPARATOR.match(text, position)
            if separator is None:
                break
            position = separator.end()
        if len(values) != len(names):
            continue
        for name, value in zip(names, values):
            if value is not None and _SECRET_NAME.fullmatch(name) \
                    and _quoted_secret(text[value[0]:value[1]], min_length, min_entropy):
                spans.append(value)
    return spans


# A login given by position to a call its name says logs in or connects (`ftp.login("user", "...")`,
# `connect(host, "root", "...")`, `MySQLdb.connect("db", "app", "...", "shop")`): the literal after
# the user's, which is the first literal, or the second of three or more in a row (the first a host).
# Arguments before them are no literals nor calls (`host`, `port`). The word ends the called name.
_LOGIN_CALL = re.compile(
    rf"(?i)(?<![{_NAME_CHAR}])[{_NAME_CHAR}]*(?:login|connect)\(\s*(?:[^\s()\"'`,][^()\"'`,\n]*,\s*)*"
    rf"(?:{_QUOTED}\s*,\s*(?={_QUOTED}\s*,\s*{_QUOTED}))?{_QUOTED}\s*,\s*(?P<value>{_QUOTED})(?=\s*[,)])")


def login_value(match: re.Match, min_length: int, min_entropy: float) -> tuple[int, int] | None:
    """The span of the password `match` (of _LOGIN_CALL) holds when it is a secret (judged as an
    assigned value is, and holding no code's marks, as a call's literal), else None."""
    literal = _LITERAL.match(match.string, match.start("value"))
    assert literal is not None  # _LOGIN_CALL matched a literal there
    span = _content_span(literal)
    value = match.string[span[0]:span[1]]
    if not _quoted_secret(value, min_length, min_entropy) or any(c in value for c in _CODE_MARKS):
        return None
    return span


def login_secrets(text: str, starts: list[int], min_length: int, min_entropy: float) -> list[tuple[int, int]]:
    """The spans of the secrets of _LOGIN_CALL's matches in `text`, as its `finditer` finds them,
    tried only at `starts` (the name runs a login word ends, in order)."""
    spans: list[tuple[int, int]] = []
    position = 0
    for start in starts:
        if start < position:
            continue
        match = _LOGIN_CALL.match(text, start)
        if match is None:
            continue
        position = match.end()
        span = login_value(match, min_length, min_entropy)
        if span is not None:
            spans.append(span)
    return spans


def apart(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """`spans` in order, each that overlaps one before it left out."""
    kept: list[tuple[int, int]] = []
    for span in sorted(spans):
        if not kept or span[0] >= kept[-1][1]:
            kept.append(span)
    return kept


def _masked_spans(text: str, spans: list[tuple[int, int]]) -> str:
    """`text` with each of `spans` (in order, apart) replaced by MASK."""
    pieces: list[str] = []
    position = 0
    for start, end in spans:
        pieces += [text[position:start], MASK]
        position = end
    pieces.append(text[position:])
    return "".join(pieces)


_INI_SECTION = re.compile(r"\[[\w .:/-]+\][ \t]*$")
_PACKAGE_INDEX_SECTION = re.compile(r"(?m)^\[(?:distutils|pypi|testpypi)\]")
_INI_PASSWORD = re.compile(r"(?m)^[ \t]*password[ \t]*[=:][ \t]*\S")
_YAML_KEY = re.compile(r"[A-Za-z][\w-]*:(?:\s|$)")
_KUBECONFIG_KIND = re.compile(r"(?m)^kind:[ \t]*Config[ \t]*$")
_KUBECONFIG_CREDENTIAL = re.compile(r"(?m)^[ \t-]*(?:token|client-key-data|password):[ \t]*\S")
_DOCKER_AUTH = re.compile(r'"auth"\s*:\s*"[A-Za-z0-9+/=]{8,}"')
_NETRC_PASSWORD = re.compile(r"\bpassword\s+\S")
_NETRC_FIRST = re.compile(r"(?:machine|default)(?:\s|$)")  # fields apart by blanks or tabs
_KUBERNETES_SECRET = re.compile(r"(?m)^kind:[ \t]*(['\"]?)Secret\1[ \t]*$")
_KUBERNETES_SECRET_DATA = re.compile(r"(?m)^(?:data|stringData):[ \t]*$")
# The same Secret written as JSON (`kubectl get secret -o json`).
_KUBERNETES_SECRET_JSON = re.compile(r'"kind"\s*:\s*"Secret"')
_KUBERNETES_SECRET_JSON_DATA = re.compile(r'"(?:data|stringData)"\s*:\s*\{\s*"')
# YAML's document markers and directives, before a manifest's first statement (kubectl and Helm
# write `---` first).
_YAML_MARKER = re.compile(r"(?:---|\.\.\.|%YAML|%TAG)(?:\s|$)")
_KEY_VALUE_LINE = re.compile(r"(?:export[ \t]+)?[\w@/:.${}-]+=")  # .env, .npmrc: no blank before "="
_REGISTRY_LOGIN = re.compile(r"(?m)^[ \t]*(?:\S*:)?_(?:authToken|auth|password)[ \t]*=[ \t]*(?!\$)\S")
_AWS_CREDENTIAL_KEYS = ("aws_secret_access_key", "aws_session_token")


def _statements(text: str) -> list[str]:
    """The lines of `text` that are neither blank nor comments (#, ;), stripped."""
    return [stripped for stripped in map(str.strip, text.split("\n")) if stripped and stripped[0] not in "#;"]


def secret_file_reason(text: str, min_length: int = 12, min_entropy: float = 3.5) -> str | None:
    """What makes `text` a credentials file whatever its name (a private key, AWS credentials, a
    kubeconfig with credentials, a package registry's or netrc's logins, a Docker config with
    registry logins, a Google service account key, a .env file), or None for other files.

    Each rule first looks at the first statement (its shape: `[section]`, `key: value`, `{`,
    `key=value`), so a source file costs a glance at its head (docs/measurements.md#secret-masking-cost)."""
    text = text.removeprefix("\ufeff")  # a byte-order mark hides no file's first statement
    head = _statements(text[:4096])
    first = next((statement for statement in head if not _YAML_MARKER.match(statement)), "")
    if first.startswith("-----BEGIN") and "PRIVATE KEY" in first:
        return "a private key"
    if first.startswith("PuTTY-User-Key-File-"):
        return "a PuTTY private key"
    if _INI_SECTION.match(first):
        if any(key in text.lower() for key in _AWS_CREDENTIAL_KEYS):
            return "AWS credentials"
        if _PACKAGE_INDEX_SECTION.search(text) and _INI_PASSWORD.search(text):
            return "a package index's logins"
        return None
    if _YAML_KEY.match(first):
        if "kind: Config" in text and _KUBECONFIG_KIND.search(text) and _KUBECONFIG_CREDENTIAL.search(text):
            return "a kubeconfig with credentials"
        if "Secret" in text and _KUBERNETES_SECRET.search(text) and _KUBERNETES_SECRET_DATA.search(text):
            return "a Kubernetes Secret with data"
        return None
    if first.startswith("{"):
        if '"auths"' in text and _DOCKER_AUTH.search(text):
            return "a Docker config with registry logins"
        if '"service_account"' in text and '"private_key"' in text:
            return "a Google service account key"
        if '"Secret"' in text and _KUBERNETES_SECRET_JSON.search(text) and _KUBERNETES_SECRET_JSON_DATA.search(text):
            return "a Kubernetes Secret with data"
        return None
    if _NETRC_FIRST.match(first) and _NETRC_PASSWORD.search(text):
        return "netrc logins"
    if _KEY_VALUE_LINE.match(first) and all(_KEY_VALUE_LINE.match(line) for line in _statements(text)):
        if _REGISTRY_LOGIN.search(text):
            return "a package registry's logins"
        if mask_secrets(text, min_length, min_entropy)[1]:
            return "environment variables with secrets (a .env file)"
    return None


def _mask_putty_private_lines(text: str) -> tuple[str, int]:
    """`text` with the lines after each `Private-Lines: N` masked (N of them), and how many blocks."""
    lines = text.split("\n")
    found = 0
    number = 0
    while number < len(lines):
        match = _PUTTY_PRIVATE_LINES.match(lines[number].strip() + "\n")
        number += 1
        if match is None:
            continue
        block = range(number, min(len(lines), number + int(match["count"])))
        if any(lines[i].strip() and lines[i].strip() != MASK for i in block):
            found += 1
        for i in block:
            lines[i] = MASK if lines[i].strip() else lines[i]
        number = block.stop
    return "\n".join(lines), found


def _mask_base64_private_keys(text: str) -> tuple[str, int]:
    """`text` with each private key encoded in base64 masked (line by line, where it is wrapped),
    and how many; a certificate or public key encoded so is left."""
    found = 0

    def masked(match: re.Match) -> str:
        nonlocal found
        head = match.group(0)[:64]
        try:
            decoded = base64.b64decode(head[:len(head) // 4 * 4])
        except ValueError:
            return match.group(0)
        if b"PRIVATE KEY" not in decoded:
            return match.group(0)
        found += 1
        return "\n".join(line[:len(line) - len(line.lstrip())] + MASK if line.strip() else line
                         for line in match.group(0).split("\n"))

    return _BASE64_PEM.sub(masked, text), found


# A Kubernetes Secret's manifest inside any text, which `secret_file_reason` does not hold back whole
# (a Helm template, whose first line is a template's; a README): its `kind: Secret` line (the
# mapping's key column: what precedes `kind`, a list item's `- ` too) and its data's keys.
_SECRET_KIND = re.compile(r"(?P<head>[ \t]*(?:-[ \t]+)?)kind:[ \t]*(['\"]?)Secret\2[ \t]*(?:#.*)?")
_SECRET_DATA = re.compile(r"(?P<head>[ \t]*(?:-[ \t]+)?)(?:data|stringData):[ \t]*(?:#.*)?")
_DOCUMENT_BREAK = re.compile(r"(?:---|\.\.\.)(?:[ \t]|$)|```|~~~")  # YAML's document markers, a Markdown fence
_TEMPLATE_ONLY = re.compile(r"\{\{[^'\"`]*\}\}")  # Helm's `{{ .Values.db.password | b64enc }}`: a name, no value
_DATA_KEY = re.compile(r"""(?:"[^"\n]*+"|'[^'\n]*+'|[^\s:#'"-][^:#\n]*+):(?=[ \t]|$)""")


def _line_shape(line: str) -> tuple[str, int, int] | None:
    """A YAML line's content (stripped), indentation and key column (past a list item's `- `); None
    for a line no mapping ends at: blank, a comment, a template's alone (`{{- if ... }}`)."""
    content = line.strip(" \t\r")
    if not content or content[0] == "#" or content[0] == "{" and _TEMPLATE_ONLY.fullmatch(content):
        return None
    indent = len(line) - len(line.lstrip(" \t"))
    key_column = indent
    if content.startswith(("- ", "-\t")):
        key_column = len(line) - len(line[indent + 1:].lstrip(" \t"))
    return content, indent, key_column


def _mapping_start(lines: list[str], number: int, key_column: int, done: int) -> int:
    """The first line of the YAML mapping whose keys stand at `key_column`, lines[number] one of
    them: the walk up stops at a document marker, a line indented less (a list item's `- ` line is
    the mapping's own first line), or lines[done] (those above are looked at already)."""
    first = number
    for above in range(number - 1, done - 1, -1):
        shape = _line_shape(lines[above])
        if shape is None:
            continue
        if _DOCUMENT_BREAK.match(shape[0]) or shape[1] < key_column and shape[2] != key_column:
            break
        first = above
        if shape[1] < key_column:  # the list item's first line
            break
    return first


def _ends_mapping(shape: tuple[str, int, int] | None, key_column: int) -> bool:
    """Whether a line after a mapping's first (its `_line_shape`) ends the mapping whose keys stand
    at `key_column`: a document marker, or a line indented less."""
    return shape is not None and (_DOCUMENT_BREAK.match(shape[0]) is not None or shape[1] < key_column)


def _mask_kubernetes_secret_data(text: str) -> tuple[str, int]:
    """`text` with the values under `data:` and `stringData:` of each Kubernetes Secret's manifest
    masked (each entry's value, each line of a block scalar's), and how many lines. The manifest is
    the mapping holding its `kind: Secret`: the lines from its start (a document marker, a list
    item's `- `, a line indented less) to its end; a template's value (`{{ .Values.x | b64enc }}`) is
    a name, and stays. Each line is looked at once or twice, however many Secrets a text holds."""
    lines = text.split("\n")
    offsets = list(accumulate((len(line) + 1 for line in lines), initial=0))  # where each line starts
    spans: list[tuple[int, int]] = []
    done = 0  # lines[:done] are looked at
    for number in range(len(lines)):
        if number < done or "Secret" not in lines[number]:
            continue
        kind = _SECRET_KIND.fullmatch(lines[number])
        if kind is None:
            continue
        key_column = len(kind["head"])
        first = _mapping_start(lines, number, key_column, done)
        at = first
        while at < len(lines):
            shape = _line_shape(lines[at])
            if at > first and _ends_mapping(shape, key_column):
                break
            at += 1
            if shape is not None and shape[2] == key_column and "ata:" in shape[0]:
                data = _SECRET_DATA.fullmatch(lines[at - 1])
                if data is not None and len(data["head"]) == key_column:
                    at = _secret_data_values(lines, offsets, at, key_column, spans)
        done = at
    spans = [(start, end) for start, end in spans if text[start:end] != MASK]
    return _masked_spans(text, spans), len(spans)


def _secret_data_values(lines: list[str], offsets: list[int], first: int, parent_column: int,
                        spans: list[tuple[int, int]]) -> int:
    """Adds to `spans` those of the values of the entries from lines[first] on under a Secret's
    `data:` (at `parent_column`): each entry's value, and the whole of each line deeper than the
    entries (a block scalar's, a value wrapped over lines). Returns the number of the line after them."""
    entry_column = None
    number = first
    while number < len(lines):
        shape = _line_shape(lines[number])
        if shape is None:
            number += 1
            continue
        content, indent, _ = shape
        if indent <= parent_column:
            break
        if entry_column is None:
            entry_column = indent
        start = offsets[number] + indent
        number += 1
        if indent > entry_column:
            spans.append((start, start + len(content)))
            continue
        key = _DATA_KEY.match(content)
        if key is None:
            continue
        value = content[key.end():].lstrip(" \t")
        if value and value[0] not in "|>#" and not (value[0] == "{" and _TEMPLATE_ONLY.fullmatch(value)):
            at = start + len(content) - len(value)
            spans.append((at, at + len(value)))
    return number


# A JSON Web Key (`{"kty": "RSA", ...}`: JSON, a Python dict, a JavaScript object, keyword arguments):
# its private members are secrets whatever their shape (RSA's `d` and the primes and exponents that
# give it, EC's and OKP's `d`, a symmetric key's `k`). A key without one is public: its modulus (`n`)
# and its curve point (`x`, `y`) are random base64url, which the token rules took for a prefixed
# token when it began like one (2 to 12 letters and digits, then `_` or `-`).
_JWK_TYPE = re.compile(r"""(?<![\w$])\\?["']?kty\\?["']?\s*+[:=]""")
_JWK_MEMBER = re.compile(r"""(?<![\w$-])(?P<quote>\\?["']?)(?P<member>dp|dq|qi|[dpqknexy])(?P=quote)\s*+[:=]\s*+"""
                         r"""(?P<open>\\?["'`])(?P<value>[^\s"'`\\]*+)(?P=open)""")
_JWK_PRIVATE_MEMBERS = frozenset({"d", "p", "q", "dp", "dq", "qi", "k"})
_JWK_PUBLIC_MEMBERS = frozenset({"n", "e", "x", "y"})
_JWK_MAX_CHARACTERS = 32_768  # an 8192-bit RSA key's, pretty-printed, with a certificate chain: 10,000


def _json_web_keys(text: str) -> list[list[re.Match]]:
    """The members of each JSON Web Key in `text`: the object (braces or a call's parentheses,
    nearest each way) around each `kty`, in order. Each character is looked at a bounded number
    of times, however many `kty`s, braces and parentheses a hostile line holds."""
    keys: list[list[re.Match]] = []
    done = 0  # text[:done] is looked at
    closes = {"}": -1, ")": -1}  # the first of each at or after the last place looked from (len(text): none)
    for kty in _JWK_TYPE.finditer(text):
        at = kty.start()
        if at < done:
            continue
        start = max(text.rfind("{", done, at), text.rfind("(", done, at))
        done = at + 1
        for mark, close in closes.items():
            if close < at:
                found = text.find(mark, at)
                closes[mark] = len(text) if found < 0 else found
        close = min(closes.values())
        if close == len(text):
            break  # no object closes after here
        if start < 0 or close + 1 - start > _JWK_MAX_CHARACTERS:
            continue
        keys.append(list(_JWK_MEMBER.finditer(text, start, close + 1)))
        done = close + 1
    return keys


# A JSON Web Key written in YAML (a JWKS in a config, a Helm value): `kty: RSA` and its members,
# each on its line at the mapping's key column (`- ` of a list item before the first), unquoted or
# quoted; a masked value still names its member (the key stays private when masked again).
_YAML_JWK_TYPE = re.compile(r"""(?P<head>[ \t]*(?:-[ \t]+)?)(?P<quote>["']?)kty(?P=quote)[ \t]*:[ \t]+"""
                            r"""(?P<open>["']?)[A-Za-z-]{2,8}(?P=open)[ \t]*(?:#.*)?\r?""")
_YAML_JWK_MEMBER = re.compile(r"""(?P<head>[ \t]*(?:-[ \t]+)?)(?P<quote>["']?)"""
                              r"""(?P<member>dp|dq|qi|[dpqknexy])(?P=quote)[ \t]*:[ \t]+"""
                              r"""(?P<open>["']?)(?P<value>[A-Za-z0-9_+/=-]++|\[REDACTED\])(?P=open)"""
                              r"""[ \t]*(?:#.*)?\r?""")


def _yaml_json_web_keys(text: str) -> list[list[tuple[str, int, int]]]:
    """The members (name, value's span) of each JSON Web Key written as a YAML mapping in `text`:
    the lines of the mapping holding a `kty:` line (from its start, a list item's `- ` or a line
    indented less, to its end), those at its key column. Each line is looked at a bounded number of
    times, however many `kty`s a text holds."""
    lines = text.split("\n")
    offsets = list(accumulate((len(line) + 1 for line in lines), initial=0))  # where each line starts
    keys: list[list[tuple[str, int, int]]] = []
    done = 0  # lines[:done] are looked at
    at = text.find("kty")
    while at >= 0:
        number = bisect_right(offsets, at) - 1
        kind = None if number < done else _YAML_JWK_TYPE.fullmatch(lines[number])
        if kind is not None:
            key_column = len(kind["head"])
            first = _mapping_start(lines, number, key_column, done)
            members: list[tuple[str, int, int]] = []
            below = first
            while below < len(lines):
                shape = _line_shape(lines[below])
                if below > first and _ends_mapping(shape, key_column):
                    break
                if shape is not None and shape[2] == key_column:
                    member = _YAML_JWK_MEMBER.fullmatch(lines[below])
                    if member is not None and len(member["head"]) == key_column:
                        members.append((member["member"], offsets[below] + member.start("value"),
                                        offsets[below] + member.end("value")))
                below += 1
            keys.append(members)
            done = below
        else:
            done = max(done, number + 1)
        at = text.find("kty", offsets[done]) if done < len(lines) else -1
    return keys


def web_key_members(text: str) -> list[list[tuple[str, int, int]]]:
    """The members (name, value's span) of each JSON Web Key in `text`, written as JSON (or a dict,
    an object, keyword arguments) or as YAML."""
    keys = [[(member["member"], *member.span("value")) for member in members] for members in _json_web_keys(text)]
    return keys + _yaml_json_web_keys(text)


def _mask_json_web_keys(text: str) -> tuple[str, int, list[tuple[int, int]]]:
    """`text` with each private member of a JSON Web Key masked, how many, and where the public
    members' values of the keys holding no private member lie in the masked text: what the token
    rules for random values (not an issuer's shape) leave."""
    private: set[tuple[int, int]] = set()
    public: list[tuple[int, int]] = []
    for members in web_key_members(text):
        if any(name in _JWK_PRIVATE_MEMBERS for name, _, _ in members):
            private.update((start, end) for name, start, end in members
                           if name in _JWK_PRIVATE_MEMBERS and start < end and text[start:end] != MASK)
        else:
            public += [(start, end) for name, start, end in members if name in _JWK_PUBLIC_MEMBERS]
    spans = apart(list(private))
    # each public value moves by what the masks before it add to the text's length
    added = list(accumulate((len(MASK) - (end - start) for start, end in spans), initial=0))
    ends = [end for _, end in spans]
    public = sorted((start + added[bisect_right(ends, start)], end + added[bisect_right(ends, start)])
                    for start, end in public)
    return _masked_spans(text, spans), len(spans), public


GENERIC_TOKEN_ISSUERS = frozenset({"prefixed-token", "argument-literal"})


def inside_any(span: tuple[int, int], spans: list[tuple[int, int]]) -> bool:
    """Whether `span` lies inside one of `spans` (in order, apart)."""
    at = bisect_right(spans, (span[0], math.inf)) - 1  # the last starting at or before it
    return at >= 0 and spans[at][0] <= span[0] and span[1] <= spans[at][1]


def _mask_basic_auth_values(text: str) -> tuple[str, int]:
    """`text` with each `auth` value that decodes to `user:password` masked, and how many."""
    if "auth" not in text:
        return text, 0
    found = 0

    def masked(match: re.Match) -> str:
        nonlocal found
        start = match.start() - (text[match.start() - 1:match.start()] == "_")  # npm's `_auth`
        if start > 0 and (text[start - 1].isalnum() or text[start - 1] in "_-"):
            return match.group(0)  # a longer name: `oauth`, `basic_auth`
        value = match["secret"]
        try:
            decoded = base64.b64decode(value + "=" * (-len(value) % 4), validate=True).decode("ascii")
        except ValueError:
            return match.group(0)
        user, colon, password = decoded.partition(":")
        if not (colon and user and password and decoded.isprintable()):
            return match.group(0)
        found += 1
        return text[match.start():match.start("secret")] + MASK

    return _BASIC_AUTH_VALUE.sub(masked, text), found


# A Kubernetes Secret written as JSON (or a Python dict, a JavaScript object) in any text (`kubectl get
# secret -o json` pasted in a README, a test's fixture, the escaped copy in its `last-applied-
# configuration` annotation): the values under `data` / `stringData` of an object whose `kind` is
# "Secret". Objects are told by their braces (those inside strings counted too: a template's `{{ }}`
# and an escaped object's are paired).
_JSON_SECRET_KIND = re.compile(r"""(?<![\w$.-])(?P<quote>\\?["']?)kind(?P=quote)\s*+:\s*+"""
                               r"""(?P<open>\\?["'])Secret(?P=open)""")
_JSON_SECRET_DATA = re.compile(r"""(?<![\w$.-])(?P<quote>\\?["']?)(?:data|stringData)(?P=quote)\s*+:\s*+\{""")
# A brace, or an object holding none (taken whole: `{}`, a data object, a label's map).
_BRACES = re.compile(r"\{[^{}]*+\}|[{}]")
# An entry of a data object: its key (quoted, escaped-quoted, or a bare name) and its string value.
# A quote after a backslash opens no string (each string scanned from its own quote alone).
_JSON_DATA_ENTRY = re.compile(
    r"""(?:(?<!\\)"(?:[^"\\\n]|\\.)*+"|(?<!\\)'(?:[^'\\\n]|\\.)*+'|\\"[^"\\\n]*+\\"|(?<![\w.$-])[A-Za-z_$][\w.$-]*+)"""
    r"""\s*+:\s*+(?:"(?P<double>(?:[^"\\\n]|\\.)*+)"|'(?P<single>(?:[^'\\\n]|\\.)*+)'|\\"(?P<escaped>[^"\\\n]*+)\\")""")


def _mask_kubernetes_secret_json(text: str) -> tuple[str, int]:
    """`text` with the string values under `data` and `stringData` of each Kubernetes Secret written
    as JSON masked, and how many; a template's value (`{{ .Values.x | b64enc }}`) is a name, and
    stays. One walk over the text's braces, whatever order an object's members come in (kubectl
    writes `data` before `kind`); a data object inside another one masked is read with it."""
    kinds = [match.start() for match in _JSON_SECRET_KIND.finditer(text)]
    if not kinds:
        return text, 0
    data_opens = {match.end() - 1 for match in _JSON_SECRET_DATA.finditer(text)}
    # the objects open, innermost last: where each opens, whether its kind is Secret, its data objects
    opens: list[int] = []
    secret: list[bool] = []
    data: dict[int, list[tuple[int, int]]] = {}  # by depth, for the objects holding one
    secret_data: list[tuple[int, int]] = []
    next_kind = 0
    for brace in _BRACES.finditer(text):
        at, end = brace.span()
        while next_kind < len(kinds) and kinds[next_kind] < at:
            if opens:
                secret[-1] = True  # a `kind` belongs to the object open around it
            next_kind += 1
        if end - at == 1 and text[at] == "{":
            opens.append(at)
            secret.append(False)
            continue
        if end - at > 1:  # an object holding none: no data object of its own
            while next_kind < len(kinds) and kinds[next_kind] < end:
                next_kind += 1
            start = at
        elif opens:
            start = opens.pop()
            if secret.pop():
                secret_data += data.get(len(opens), ())
            data.pop(len(opens), None)
        else:
            continue
        if start in data_opens and opens:
            data.setdefault(len(opens) - 1, []).append((start + 1, end - 1))
    spans: list[tuple[int, int]] = []
    for data_start, data_end in apart(secret_data):  # the outermost: each character read once
        for entry in _JSON_DATA_ENTRY.finditer(text, data_start, data_end):
            group = next(name for name in ("double", "single", "escaped") if entry[name] is not None)
            value = entry[group]
            if value and value != MASK and not (value[0] == "{" and _TEMPLATE_ONLY.fullmatch(value)):
                spans.append(entry.span(group))
    spans = apart(spans)
    return _masked_spans(text, spans), len(spans)


# PowerShell's pipeline gives the value first: `"..." | ConvertTo-SecureString -AsPlainText -Force`.
_PIPED_SECURE_STRING = re.compile(r"""(?i)(?P<open>["'])(?P<value>[^"'\s\\|`]++)(?P=open)[ \t]*+\|[ \t]*+"""
                                  r"""convertto-securestring(?![\w-])""")


def _mask_piped_secure_strings(text: str, min_length: int, min_entropy: float) -> tuple[str, int]:
    """`text` with each literal piped into ConvertTo-SecureString masked where it looks random (as
    a value given to a secret name must), and how many."""
    found = 0

    def masked(match: re.Match) -> str:
        nonlocal found
        if not _quoted_secret(match["value"], min_length, min_entropy):
            return match.group(0)
        found += 1
        return match.group("open") + MASK + match.group(0)[match.end("value") - match.start():]

    return _PIPED_SECURE_STRING.sub(masked, text), found


def mask_secrets(text: str, min_length: int = 12, min_entropy: float = 3.5) -> tuple[str, int]:
    """`text` with every secret replaced by MASK, and how many were replaced."""
    found = 0

    def keep_lines(match: re.Match) -> str:
        nonlocal found
        body = match["body"]
        inner = "\n".join(MASK if line.strip() else line for line in body.split("\n"))
        found += inner != body  # a block masked before is no new secret
        return match.group(0).replace(body, inner, 1)

    text = _PRIVATE_KEY.sub(keep_lines, text)
    if "PRIVATE KEY" in text:
        text = _PRIVATE_KEY_OPEN.sub(keep_lines, text)
    if "Private-Lines:" in text:
        text, count = _mask_putty_private_lines(text)
        found += count

    if _BASE64_PEM_HEAD in text:
        text, count = _mask_base64_private_keys(text)
        found += count
    if "Secret" in text and "kind:" in text:
        text, count = _mask_kubernetes_secret_data(text)
        found += count
    if "Secret" in text and "kind" in text:
        text, count = _mask_kubernetes_secret_json(text)
        found += count
    public_keys: list[tuple[int, int]] = []
    if "kty" in text:
        text, count, public_keys = _mask_json_web_keys(text)
        found += count

    tokens = token_secrets(text)
    if public_keys:
        tokens = [token for token in tokens
                  if not (token[2] in GENERIC_TOKEN_ISSUERS and inside_any(token[:2], public_keys))]
    if tokens:
        found += len(tokens)
        text = _masked_spans(text, [(start, end) for start, end, _ in tokens])

    def url(match: re.Match) -> str:
        nonlocal found
        if match["secret"] == MASK:
            return match.group(0)
        found += 1
        return match["head"] + MASK

    def url_password(match: re.Match) -> str:
        # `user:pass@`, `postgres:postgres@`, `{token}:x-oauth-basic@`: a word, no digit, is a placeholder
        # (tests and docs are full of them), as a value of words is for the named-value rule.
        password = match["secret"]
        if not any(c.isdigit() for c in password) and reads_as_words(password):
            return match.group(0)
        return url(match)

    def url_token_user(match: re.Match) -> str:
        return url(match) if random_body(re.sub(r"[._~-]", "", match["secret"])) else match.group(0)

    def signed(match: re.Match) -> str:
        return match.group(0) if MASK in match["secret"] or reads_as_words(match["secret"]) else url(match)

    text = _on_lines_holding(text, "://", lambda line: _URL_TOKEN_USER.sub(url_token_user, _WEBHOOK_PATH.sub(
        url, _URL_PASSWORD.sub(url_password, line))))
    text = _on_lines_holding(text, "@tcp(", lambda line: _GO_DSN_PASSWORD.sub(url, line))
    for marker in ("mysql", "mariadb"):
        text = _on_lines_holding(text, marker, lambda line: _MYSQL_GLUED_PASSWORD.sub(signed, line))

    text, count = _mask_basic_auth_values(text)
    found += count

    for marker in ("?", "&"):  # a query starts with "?"; a SAS token pasted alone starts with "sv=", holds "&"
        text = _on_lines_holding(text, marker, lambda line: _SIGNED_QUERY.sub(signed, line))

    # Values told by their place: in a multiple assignment, a login call's password.
    lowered = lower_case(text)
    if "convertto-securestring" in lowered:
        text, count = _mask_piped_secure_strings(text, min_length, min_entropy)
        if count:
            found += count
            lowered = lower_case(text)
    starts: list[int] | None = name_run_starts(text, lowered=lowered)
    placed = apart(multiple_assignment_secrets(text, line_starts(text, starts), min_length, min_entropy)
                   + login_secrets(text, name_run_starts(text, _LOGIN_LITERALS, lowered), min_length, min_entropy))
    if placed:
        found += len(placed)
        text, starts = _masked_spans(text, placed), None  # the names moved
    pieces: list[str] = []
    position = 0  # text[:position] is in pieces
    for match in assignments(text, starts):
        masked = None if match.start() < position else masked_assignment(match, min_length, min_entropy)
        if masked is None:
            continue  # no secret, or a name inside a value masked already
        found += 1
        pieces += [text[position:match.start()], masked[1]]
        position = masked[0]
    pieces.append(text[position:])
    return "".join(pieces), found
