""".gitignore rules for repositories without git, matched in polynomial time.

A cloned repository writes its own .gitignore. Translated the plain way, a line such as
`*a*a*a…*a*b` becomes a regex whose stars can split a long file name in exponentially many ways,
and matching it hung indexing (git's own matcher gives up on such searches early). Here every
rule becomes one regex in which each choice, once it can no longer matter, is made once:

- a pattern without a slash is matched against the path's last name alone (as git does); any
  other against "/" + each of the path's names, so a glob segment only ever sees one name;
- inside a segment, `A*B*C` splits into fixed-length pieces (literal characters, `?`, `[...]`): a
  piece between two stars is matched at its earliest place and never tried again (an atomic
  group; an earlier place leaves every later piece at least as much room), and only the last star
  backtracks, over one name;
- `**` segments work the same way one level up: the run of segments between two `**` is matched
  at the earliest folder where it fits, and only the last run backtracks, over the path's folders.

Semantics are git's (gitignore(5), wildmatch with WM_PATHNAME): comments, escaped and trailing
spaces, `!` negation, a trailing `/` for folders only, a slash at the start or in the middle
anchoring the pattern to the .gitignore's folder, `**/`, `/**/` and `/**`, `[...]` with ranges,
`!`/`^` negation and `[:class:]` names. A malformed pattern (an unclosed `[`, a trailing backslash,
an unknown class) matches nothing, as in git. Two quirks of git's code that its documentation does
not describe are left out: a `**` glued to the literal start of a pattern (`src/a**/x`, which git
lets cross folders and even match `src/ax`), and `**\\/` (an escaped slash), which git does not
let stand for zero folders.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from repomem.regular_files import read_regular_text

# wildmatch's character classes, in the C locale (ASCII).
_CLASSES = {
    "alnum": "a-zA-Z0-9", "alpha": "a-zA-Z", "blank": " \\t", "cntrl": "\\x00-\\x1f\\x7f", "digit": "0-9",
    "graph": "\\x21-\\x7e", "lower": "a-z", "print": "\\x20-\\x7e", "punct": "!-/:-@\\[-`{-~",
    "space": " \\t\\n\\r\\f\\v", "upper": "A-Z", "xdigit": "0-9A-Fa-f",
}


class _Malformed(ValueError):
    """A pattern git would never match."""


@dataclass(frozen=True)
class IgnoreRule:
    negated: bool  # `!pattern`: a match re-includes the path
    folders_only: bool  # `pattern/`: matches folders only
    # A pattern without a slash matches a path's last name, at any depth (as git's match_basename);
    # any other matches "/" + the path relative to the .gitignore's folder.
    name_only: bool
    regex: re.Pattern[str]

    def subject(self, path: str) -> str:
        return path[path.rfind("/") + 1:] if self.name_only else "/" + path


def _trim_trailing_spaces(line: str) -> str:
    """Trailing spaces go, unless escaped with a backslash (git keeps the escaped one)."""
    end = len(line)
    while end > 0 and line[end - 1] == " ":
        backslashes = len(line[:end - 1]) - len(line[:end - 1].rstrip("\\"))
        if backslashes % 2 == 1:
            break
        end -= 1
    return line[:end]


def _bracket(pattern: str, start: int) -> tuple[str, int]:
    """The regex of the `[...]` at `start` and the index after it; never matches "/"."""
    position = start + 1
    negated = position < len(pattern) and pattern[position] in "!^"
    position += negated
    members: list[str] = []
    first = True
    previous: str | None = None  # the last single character, a possible range start
    while True:
        if position >= len(pattern):
            raise _Malformed("unclosed [")
        char = pattern[position]
        if char == "]" and not first:
            position += 1
            break
        first = False
        if char == "[" and pattern.startswith(":", position + 1):
            close = pattern.find("]", position + 2)  # git: the next "]" ends the class, or the set
            if close == -1:
                raise _Malformed("unclosed [")
            if close > position + 2 and pattern[close - 1] == ":":
                name = pattern[position + 2:close - 1]
                if name not in _CLASSES:
                    raise _Malformed(f"unknown class [:{name}:]")
                members.append(_CLASSES[name])
                previous = None
                position = close + 1
                continue
        escaped = char == "\\"
        if escaped:
            position += 1
            if position >= len(pattern):
                raise _Malformed("trailing backslash")
            char = pattern[position]
        if (char == "-" and not escaped and previous is not None and position + 1 < len(pattern)
                and pattern[position + 1] != "]"):
            position += 1
            last = pattern[position]
            if last == "\\":
                position += 1
                if position >= len(pattern):
                    raise _Malformed("trailing backslash")
                last = pattern[position]
            if previous <= last:  # reversed, git matches its first character only (listed already)
                members.append(f"{re.escape(previous)}-{re.escape(last)}")
            previous = None
            position += 1
            continue
        members.append(re.escape(char))
        previous = char
        position += 1
    if negated:
        return f"[^{''.join(members)}/]", position
    # A range such as `.-0` holds "/", which only the path's separators are.
    return (f"(?!/)[{''.join(members)}]" if members else "(?!)"), position


# Tokens of a pattern besides one character's regex (a literal star is "\\*", never "*").
_STAR = "*"  # any characters within one name
_SLASH = "/"  # between two names


def _tokens(pattern: str) -> list[str]:
    """The pattern as _STAR, _SLASH and one regex per character. A `[...]` may hold a slash (git
    reads it as one character that never matches), and an escaped slash separates names too."""
    tokens: list[str] = []
    position = 0
    while position < len(pattern):
        char = pattern[position]
        if char == "[":
            regex, position = _bracket(pattern, position)
            tokens.append(regex)
            continue
        if char == "\\":
            position += 1
            if position >= len(pattern):
                raise _Malformed("trailing backslash")
            char = pattern[position]
            tokens.append(_SLASH if char == "/" else re.escape(char))
        elif char in (_STAR, _SLASH):
            tokens.append(char)
        else:
            tokens.append("[^/]" if char == "?" else re.escape(char))
        position += 1
    return tokens


def _segment_regex(tokens: list[str]) -> str:
    """One name's tokens as a regex: fixed pieces joined by stars, each piece between two stars
    matched at its earliest place (atomic), only the last star backtracking."""
    pieces: list[list[str]] = [[]]  # pieces[0] before the first star, then one per star
    for token in tokens:
        if token != _STAR:
            pieces[-1].append(token)
        elif len(pieces) == 1 or pieces[-1]:  # stars in a row are one star
            pieces.append([])
    head, *starred = ["".join(piece) for piece in pieces]
    if not starred:
        return head
    *middle, last = starred
    return head + "".join(f"(?>[^/]*?{piece})" for piece in middle) + f"[^/]*{last}"


def _path_regex(tokens: list[str]) -> str:
    """A pattern's tokens as a regex over "/" + a whole relative path. A name of two stars or more
    (`**`) stands for zero or more whole folders."""
    runs: list[tuple[bool, list[str]]] = []  # (after a `**`, the run's segment regexes)
    after_any = False
    segments: list[list[str]] = [[]]
    for token in tokens:
        if token == _SLASH:
            segments.append([])
        else:
            segments[-1].append(token)
    for segment in segments:
        if len(segment) >= 2 and all(token == _STAR for token in segment):  # git reads `***` as `**`
            after_any = True
            continue
        if after_any or not runs:
            runs.append((after_any, []))
            after_any = False
        runs[-1][1].append(_segment_regex(segment))
    trailing_any = after_any  # `abc/**`: everything inside, one name or more
    regex = ""
    for number, (floating, run) in enumerate(runs):
        body = "".join(f"/{segment}" for segment in run)
        if not floating:
            regex += body  # only the first run: anchored at the .gitignore's folder
        elif number == len(runs) - 1 and not trailing_any:
            regex += f"(?:/[^/]+)*?{body}"  # must end the path: this one search may backtrack
        else:
            regex += f"(?>(?:/[^/]+)*?{body}(?=/))"  # the earliest folder it fits at is the best
    if trailing_any:
        regex += "(?:/[^/]+)+"
    return regex + r"\Z"


def parse_rule(line: str) -> IgnoreRule | None:
    """One .gitignore line as a rule; None for blank lines, comments and malformed patterns."""
    text = _trim_trailing_spaces(line)
    if not text or text.startswith("#"):
        return None
    negated = text.startswith("!")
    text = text[negated:]
    folders_only = text.endswith("/")
    text = text[:-1] if folders_only else text
    if not text:
        return None
    # A slash at the start or in the middle anchors the pattern to the .gitignore's folder; a
    # name alone matches at any depth.
    name_only = "/" not in text
    try:
        pattern = _segment_regex(_tokens(text)) + r"\Z" if name_only else _path_regex(_tokens(text.removeprefix("/")))
        regex = re.compile(pattern)
    except (_Malformed, re.error):
        return None
    return IgnoreRule(negated, folders_only, name_only, regex)


def ignores(rules: list[IgnoreRule], path: str, is_dir: bool) -> bool | None:
    """The last matching rule's verdict for `path` (relative, no leading "/"): True ignored,
    False re-included, None when no rule matches."""
    for rule in reversed(rules):
        if (is_dir or not rule.folders_only) and rule.regex.match(rule.subject(path)):
            return not rule.negated
    return None


def gitignore_lines(text: str) -> list[str]:
    """A .gitignore's lines as git reads them: a UTF-8 byte order mark at the start is skipped
    (an editor's BOM made the first pattern never match), lines end at "\n" only, less one "\r"
    before it (a lone "\r", "\f" or "\x85" is part of the line, where str.splitlines split it),
    and git's C strings end a line at its first NUL."""
    lines = text.removeprefix("\ufeff").split("\n")
    return [line.removesuffix("\r").partition("\0")[0] for line in lines]


def _any_of(rules: list[IgnoreRule]) -> re.Pattern[str] | None:
    """One regex matching where any of `rules` matches (each alternative as bounded as its rule)."""
    return re.compile("|".join(f"(?:{rule.regex.pattern})" for rule in rules)) if rules else None


class IgnoreFile:
    """One .gitignore's rules. Most paths match none of them, and a walk asks about every file
    and folder: two regexes (of the name-only rules over the last name, of the others over the
    path) say so at once, and only a path some rule matches goes through the rules."""

    def __init__(self, prefix: str, rules: list[IgnoreRule], git_may_differ: bool = False):
        self.prefix = prefix  # its folder, relative, with a trailing "/" ("" at the root)
        self.rules = rules
        # A line git may read otherwise than parse_rule does (the quirks the module docstring
        # leaves out): in a git work tree, its verdicts are no certainty.
        self.git_may_differ = git_may_differ
        # (name-only rules, path rules) that may match folders, then those that may match files
        self._quick = {is_dir: (_any_of([r for r in rules if r.name_only and (is_dir or not r.folders_only)]),
                                _any_of([r for r in rules if not r.name_only and (is_dir or not r.folders_only)]))
                       for is_dir in (True, False)}

    def verdict(self, path: str, is_dir: bool) -> bool | None:
        """As `ignores`, for `path` relative to this file's folder."""
        by_name, by_path = self._quick[is_dir]
        if not ((by_name is not None and by_name.match(path[path.rfind("/") + 1:]))
                or (by_path is not None and by_path.match("/" + path))):
            return None
        return ignores(self.rules, path, is_dir)


# A `**` glued to other characters of a name, or an escaped slash: where git's matcher and this
# one part ways (module docstring), found with room to spare (a comment holding one counts too).
_GIT_READS_OTHERWISE = re.compile(r"\\/|[^/*]\*\*|\*\*[^/*]")


def read_ignore_file(path: Path, prefix: str) -> IgnoreFile | None:
    """The rules of one .gitignore; `prefix` is its folder, relative, with a trailing '/'. None
    for a file without rules, missing or unreadable, and for a symbolic link: git (since 2.32)
    refuses to follow one inside the work tree and lists the files it would have ignored."""
    try:
        if os.path.islink(path):
            return None
        lines = gitignore_lines(read_regular_text(path))
    except OSError:
        return None
    rules = [rule for rule in map(parse_rule, lines) if rule is not None]
    if not rules:
        return None
    return IgnoreFile(prefix, rules, any(_GIT_READS_OTHERWISE.search(line.removeprefix("!")) for line in lines))


class IgnoreRules:
    """The .gitignore files met so far on a walk, each applying below its own folder.

    A path's own verdict only: the walk asks about a folder before its contents and does not enter
    an ignored one, which is how git treats a file inside an ignored folder (never re-included)."""

    def __init__(self) -> None:
        self._files: list[IgnoreFile] = []

    def add_file(self, path: Path, prefix: str) -> None:
        """Add the rules of one .gitignore (read_ignore_file)."""
        self.add(read_ignore_file(path, prefix))

    def add(self, ignore_file: IgnoreFile | None) -> None:
        """Add one .gitignore's rules (None: none); those of the folders above it come first."""
        if ignore_file is not None:
            self._files.append(ignore_file)

    def ignored(self, relative_path: str, is_dir: bool) -> bool:
        """Deeper .gitignore files decide over those above them, as in git."""
        result = False
        for ignore_file in self._files:
            if not relative_path.startswith(ignore_file.prefix):
                continue
            verdict = ignore_file.verdict(relative_path[len(ignore_file.prefix):], is_dir)
            if verdict is not None:
                result = verdict
        return result

    def surely_ignored(self, relative_path: str, is_dir: bool) -> bool:
        """`ignored`, and git would say so too: False where a .gitignore that applies holds a line
        git may read otherwise. (git also reads its exclude files, which decide only where no
        .gitignore does, and the .gitignore files above a work tree's folder, which decide only
        where none inside does: they can only ignore more.)"""
        return self.ignored(relative_path, is_dir) and not any(
            ignore_file.git_may_differ for ignore_file in self._files if relative_path.startswith(ignore_file.prefix))
