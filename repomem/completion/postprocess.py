"""Turning a model's raw continuation into the completion a user sees.

Single line vs block comes from the syntax at the cursor, parsed with the file's own grammar. In
languages with indented blocks (Python): after a block opener (`def f():`,
`if x:`) the completion is the block's body, elsewhere the rest of the current line, and inside
a string or comment always one line. Generation stops at a dedent below the block, at a line
starting a new top-level statement, at the model's end strings; leaked FIM sentinels are cut,
trailing lines that repeat the code after the cursor are dropped (a one-line completion that is
the next line below the cursor: nothing), and repetition loops are cut.
In languages with brace blocks (C, Go, Rust, Java, JavaScript, ...) the body after a line ending
in `{` (or in a lambda's `{ x ->`, `{ x in`, `{ x =>`) runs to the brace that balances it: that
line ends the completion, and is left out when the code after the cursor already closes the block
(an editor's auto-paired brace). A brace language's body without braces (Scala 3's `object Main:`,
`if x then`; Kotlin's and Scala's `fun area(): Int =` continued below; a `switch` arm's `case X:`,
C++'s `public:`) ends at a dedent, as Python's. A C-family block header whose `{` is still to come
(`if (x > 0)`, `else`, a method's signature) completes its block, the `{` on its line or the next
(Allman's). In every language a line ending with a bracket it leaves open (`return (`, `x = [`)
runs on to the line that closes it. An answer stopped by the token cap or the deadline loses its
cut-off last line before the lines repeating the code after the cursor are dropped.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from repomem.languages.language import Language
from repomem.languages.python import PYTHON
from repomem.languages.treesitter import parse

# A unit written this many times in a row on one line, where the file shows no such run: a
# generation loop. 5 is too few (pytest's `IdMaker([], [], None, None, None, None, None)`);
# eval/results/loop-cut has what each count cuts of the dev sets' answers and real lines.
LOOP_REPEATS = 6
LOOP_UNIT_LINES = 8  # the longest run of lines (a loop's unit) a multi-line completion is checked for
_TOP_LEVEL = re.compile(r"^(def |class |async def |@|if __name__|import |from )")


@dataclass(frozen=True)
class CompletionShape:
    multiline: bool
    block_indent: int  # body lines must be indented deeper than this (columns); -1 = no limit
    line_prefix: str  # the cursor line's text before the cursor
    brace_block: bool = False  # the body of a `{` block: it ends at the brace balancing the opener
    # The body of a block closed by a keyword (Ruby's and Lua's `end`, the shell's `fi` / `done` / `esac`):
    # that keyword, which ends it at the opener's indent.
    keyword_closer: str = ""
    language: str = ""  # the grammar's name: which literals, comments and directives hide braces
    # The opener's statement's own indentation, as written (tabs or spaces): where a body written
    # before an editor's auto-paired `}` leaves that brace.
    closer_indent: str = ""
    # The closer of the bracket the cursor's line ends with, left open (`return (`, `const xs = [`,
    # Python's `x = foo(`): the completion runs on to the line holding it (`_bracket_body`).
    bracket_closer: str = ""
    # A brace language's block header without its `{` (`if (amount > Balance)`, `else`, a method's
    # signature): its block, on the same line (` {`) or the next (Allman's `{`), to its `}`.
    header: bool = False
    # The file's text around the cursor (before and after it): a run it shows (a table of
    # `__, __, …`) is written on purpose, not a loop, up to the length it shows (`loop_end`).
    shown: str = field(default="", compare=False, repr=False)


def _indent(line: str) -> int:
    return len(line.expandtabs(4)) - len(line.expandtabs(4).lstrip())


# Python's string literals and its line comment: a `#` inside a string starts no comment.
_PYTHON_NOT_CODE = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|#.*$')


def _opens_block(line: str) -> bool:
    """Whether the line ends a block opener's header with its `:`. A colon inside a bracket the line
    leaves open is a dict's, a slice's or an annotation's (`d = {"a":|}` with an editor's
    auto-paired brace, `x[1:|]`, `def f(x:|)`), and a lambda's colon ends no header either: these
    complete the rest of the line, whose closers are there already."""
    code = _PYTHON_NOT_CODE.sub("", line).rstrip()
    if not code.endswith(":") or _left_open(code):
        return False
    lambda_at = max((found.end() for found in _LAMBDA.finditer(code)), default=-1)
    return lambda_at < 0 or ":" in code[lambda_at:-1]  # `lambda x:` ends the line: its colon


_LAMBDA = re.compile(r"\blambda\b")


def _left_open(code: str) -> int:
    """Brackets the line's `code` opens and does not close (closers of lines above aside)."""
    depth = 0
    for char in code:
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth = max(depth - 1, 0)
    return depth


# String and character literals (single-quoted of any length: JavaScript's and PHP's strings),
# a block comment closed on its line and a line comment's text: their braces do not count.
_NOT_CODE = re.compile(r'"(?:\\.|[^"\\])*"|`(?:\\.|[^`\\])*`|\'(?:\\.|[^\'\\])*\'|/\*.*?\*/|//.*$')


class _Scan(NamedTuple):
    """What a brace language's line leaves open for the next: a literal or comment spanning lines
    (its closer, whether a backslash escapes inside it), a preprocessor directive continued with
    `\\`, and the `#if` levels of an `#else` / `#elif` branch being passed over."""
    closer: str = ""
    escapes: bool = False
    directive: bool = False
    skipping: int = 0
    # The branch passed over is an `#if 0`'s: code switched off, whose `#else` / `#elif` is the live one.
    switched_off: bool = False
    # The closer is a heredoc's terminator (PHP's `<<<EOT`): it counts only first on a line.
    heredoc: bool = False


_START = _Scan()


@dataclass(frozen=True)
class _BraceSyntax:
    # Literals and comments: `open` ones may span lines (`spanning` has their closers), `done` ones
    # close on their line.
    tokens: re.Pattern[str]
    spanning: dict[str, tuple[str, bool]]
    preprocessor: bool = False  # C's `#` lines: an `#else` branch repeats the `#if` branch's openers
    # A lambda's `{` followed by its parameters and arrow to the line's end (Kotlin's `forEach { p ->`,
    # Swift's `map { item in`, Scala's `foreach { x =>`): the line opens the lambda's body as a `{` does.
    lambda_header: re.Pattern[str] | None = None
    # Lines that end with one of these open a body on the lines below, indented and ended by a dedent
    # as Python's (the line's code: literals and comments blanked, its brackets balanced): Scala 3's
    # blocks without braces (`object Main:`, `if x then`, `xs match`, `case Some(x) =>`) and an
    # expression body continued below (`fun area(): Int =`).
    indented_opener: re.Pattern[str] | None = None


_BLOCK_COMMENT = {"/*": ("*/", False)}
# A character literal: one character or escape (`'{'`, `'\\''`, `'\\u{7B}'`), so that Rust's lifetimes
# (`&'a str`) and C++'s digit separators (`1'000`) start none.
_CHAR = r"'(?:\\(?:u\{[0-9a-fA-F]{1,6}\}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|x[0-9a-fA-F]{1,4}|[0-7]{1,3}|.)|[^'\\])'"
_STRING = r'"(?:\\.|[^"\\])*"'
_ANY_QUOTED = r"'(?:\\.|[^'\\])*'"
_BACKTICKED = r"`(?:\\.|[^`\\])*`"


def _syntax(spanning: dict[str, tuple[str, bool]], done: str, preprocessor: bool = False,
            lambda_arrow: str = "", heredoc: str = "", indented_opener: str = "") -> _BraceSyntax:
    """`heredoc`: a heredoc's opener, its terminator in the group `word`."""
    opened = "|".join(re.escape(opener) for opener in sorted(spanning, key=len, reverse=True))
    header = re.compile(rf"\{{[^{{}}]*{lambda_arrow}$") if lambda_arrow else None
    heredoc = rf"(?P<heredoc>{heredoc})|" if heredoc else ""
    return _BraceSyntax(re.compile(rf"{heredoc}(?P<open>{opened})|(?P<done>{done}|//.*$)"), spanning, preprocessor,
                        header, re.compile(rf"(?:{indented_opener})$") if indented_opener else None)


_TRIPLE = {**_BLOCK_COMMENT, '"""': ('"""', False)}
_ASSIGNED = r"(?<![=!<>])="  # `=` ending a line (`==`, `<=` and the like compare)
# A `switch` arm's label ending its line (`case "add":`, `case .rainy, .snowy:`, `default:`): its
# statements follow below, indented deeper, up to the next arm or the switch's `}` (a dedent).
_SWITCH_ARM = r"\bcase\b.*:|\bdefault\s*:"
_BRACE_SYNTAX = {
    # An arrow or an assignment ending its line (Prettier's `(x) =>` / `const s =` over a long
    # expression): the expression goes on below, indented, up to a dedent.
    **dict.fromkeys(("javascript", "typescript", "tsx"), _syntax(
        {**_BLOCK_COMMENT, "`": ("`", True)}, f"{_STRING}|{_ANY_QUOTED}",
        indented_opener=rf"{_SWITCH_ARM}|=>|{_ASSIGNED}")),
    "go": _syntax({**_BLOCK_COMMENT, "`": ("`", False)}, f"{_STRING}|{_CHAR}", indented_opener=_SWITCH_ARM),
    "rust": _syntax({**_BLOCK_COMMENT, '"': ('"', True)}, _CHAR),  # Rust's strings span lines
    "c": _syntax(_BLOCK_COMMENT, f"{_STRING}|{_CHAR}", preprocessor=True, indented_opener=_SWITCH_ARM),
    # C++'s access specifiers (`public:`) head the members below them as an arm heads its statements.
    "cpp": _syntax(_BLOCK_COMMENT, f"{_STRING}|{_CHAR}", preprocessor=True,
                   indented_opener=rf"{_SWITCH_ARM}|\b(?:public|protected|private)\s*:"),
    # C#'s verbatim strings (`@"..."`, `$@"..."`, `@$"..."`) span lines and hold no backslash escape.
    "csharp": _syntax({**_TRIPLE, '@"': ('"', False), '@$"': ('"', False)}, f"{_STRING}|{_CHAR}", preprocessor=True,
                      indented_opener=_SWITCH_ARM),
    "java": _syntax(_TRIPLE, f"{_STRING}|{_CHAR}|{_BACKTICKED}", indented_opener=_SWITCH_ARM),
    # A `when` arm's `->` ending its line (`is Circle ->`) opens its body below, as `=` does.
    "kotlin": _syntax(_TRIPLE, f"{_STRING}|{_CHAR}|{_BACKTICKED}", lambda_arrow="->",
                      indented_opener=rf"{_ASSIGNED}|->"),
    # Not Scala 2's `extends A with` (`B {` on the next line goes on with the header, no body).
    "scala": _syntax(_TRIPLE, f"{_STRING}|{_CHAR}|{_BACKTICKED}", lambda_arrow="=>", indented_opener=(
        rf"{_ASSIGNED}|=>|:|\b(?:then|else|do|yield|try|catch|finally|match)")),
    "swift": _syntax(_TRIPLE, f"{_STRING}|{_CHAR}|{_BACKTICKED}", lambda_arrow=r"\bin", indented_opener=_SWITCH_ARM),
    # PHP's heredoc and nowdoc (`<<<EOT`, `<<<'EOT'`): text up to the line starting with `EOT`.
    "php": _syntax(_BLOCK_COMMENT, rf"{_STRING}|{_ANY_QUOTED}|#(?!\[).*$",
                   heredoc=r"<<<[ \t]*(?P<quote>[\"']?)(?P<word>[A-Za-z_]\w*)(?P=quote)"),
}
_ANY_BRACES = _syntax(_BLOCK_COMMENT, f"{_STRING}|{_BACKTICKED}|{_ANY_QUOTED}")
_DIRECTIVE = re.compile(r"#\s*(\w*)")
_SWITCHED_OFF = re.compile(r"\s*(?:0+|false)\s*(?:$|//|/\*)")  # the condition of `#if 0`


def _brace_syntax(language: str) -> _BraceSyntax:
    return _BRACE_SYNTAX.get(language, _ANY_BRACES)


def _code(line: str, scan: _Scan, syntax: _BraceSyntax) -> tuple[str, _Scan]:
    """The line with its literals, comments and preprocessor directives blanked (columns kept),
    given what the lines above left open, and what it leaves open."""
    if syntax.preprocessor and not scan.closer:
        if scan.directive or line.lstrip().startswith("#"):
            skipping, switched_off = scan.skipping, scan.switched_off
            if not scan.directive:
                directive = _DIRECTIVE.match(line.lstrip())
                name = directive.group(1)
                if name == "if" and not skipping and _SWITCHED_OFF.match(line.lstrip(), directive.end()):
                    skipping, switched_off = 1, True  # `#if 0`: its lines are no code, as a comment's
                elif name in ("if", "ifdef", "ifndef"):
                    skipping += skipping > 0
                elif name in ("else", "elif", "elifdef", "elifndef"):
                    if skipping == 1 and switched_off:
                        skipping, switched_off = 0, False
                    else:
                        skipping = skipping or 1  # the branch below repeats the one above: it is passed over
                elif name == "endif":
                    skipping = max(skipping - 1, 0)
                    switched_off = switched_off and skipping > 0
            return " " * len(line), scan._replace(directive=line.rstrip().endswith("\\"), skipping=skipping,
                                                  switched_off=switched_off)
        if scan.skipping:
            return " " * len(line), scan
    pieces: list[str] = []
    at, closer, escapes, heredoc = 0, scan.closer, scan.escapes, scan.heredoc
    while True:
        if closer:
            end = _heredoc_end(line, at, closer) if heredoc else _closer_end(line, at, closer, escapes)
            if end < 0:
                pieces.append(" " * (len(line) - at))
                return "".join(pieces), scan._replace(closer=closer, escapes=escapes, heredoc=heredoc)
            pieces.append(" " * (end - at))
            at, closer, heredoc = end, "", False
        found = syntax.tokens.search(line, at)
        if found is None:
            pieces.append(line[at:])
            return "".join(pieces), scan._replace(closer="", escapes=False, heredoc=False)
        pieces.append(line[at:found.start()] + " " * (found.end() - found.start()))
        at = found.end()
        if found.lastgroup == "open":
            closer, escapes = syntax.spanning[found.group()]
        elif found.lastgroup == "heredoc":
            closer, escapes, heredoc = found["word"], False, True


def _closer_end(line: str, at: int, closer: str, escapes: bool) -> int:
    """Where the closer first found from `at` ends (one escaped by a backslash does not count); -1: none.
    A lone `"` that no backslash escapes closes only C#'s verbatim strings, where `""` is a quote."""
    while (found := line.find(closer, at)) >= 0:
        if closer == '"' and not escapes and line.startswith('""', found):
            at = found + 2
            continue
        backslashes = len(line[:found]) - len(line[:found].rstrip("\\"))
        if not escapes or backslashes % 2 == 0:
            return found + len(closer)
        at = found + 1
    return -1


def _heredoc_end(line: str, at: int, word: str) -> int:
    """Where a heredoc's terminator `word` ends when it starts the line (indented or not, followed
    by `;`, `,` or `)`); -1: the line, or its rest after the opener (`at` > 0), is the heredoc's text."""
    found = re.match(rf"[ \t]*{re.escape(word)}\b", line) if at == 0 else None
    return found.end() if found else -1


def _opens_indented_body(line: str, syntax: _BraceSyntax) -> bool:
    """Whether the line ends with its language's `indented_opener`, its brackets balanced (`f(x =`
    goes on with an argument), a comment at most after it (`val s = "a:"` ends with a string)."""
    code = _code(line, _START, syntax)[0].rstrip()
    after = line[len(code):].lstrip()
    return syntax.indented_opener is not None and syntax.indented_opener.search(code) is not None \
        and not _left_open(code) and (not after or after.startswith(("//", "/*")))


def _opens_brace_block(line: str, syntax: _BraceSyntax = _ANY_BRACES) -> bool:
    code = _code(line, _START, syntax)[0].rstrip()
    return code.endswith("{") or (syntax.lambda_header is not None and syntax.lambda_header.search(code) is not None)


def _statement_start(lines: list[str], at: int, not_code: re.Pattern[str] = _NOT_CODE,
                     brackets: str = "()[]") -> int:
    """The line that starts the statement ending at `lines[at]`: an opener written after aligned
    parameters or a condition over several lines (`           int b) {`, Python's `        b):`)
    belongs to the statement above, whose indent its closing brace stands at (its body is indented
    from). `not_code`: the language's strings and comments; `brackets`: opener-closer pairs."""
    def owed(line: str) -> int:  # brackets the line closes that it did not open
        code = not_code.sub("", line)
        return sum(code.count(brackets[i + 1]) - code.count(brackets[i]) for i in range(0, len(brackets), 2))

    unclosed = owed(lines[at])
    while unclosed > 0 and at > 0:
        at -= 1
        unclosed += owed(lines[at])
    return at


def _closing_column(code: str, depth: int, opens: str = "{", closes: str = "}") -> int | None:
    """Where in a line's `code` (`_code`: literals and comments blanked) the running brace depth,
    `depth` before the line, first falls below 0 (the column of that `}`), None where it never
    does. Run on every line at every token: a line without `}` is decided at once. `opens` and
    `closes`: the brackets counted (all kinds, as one depth, for `_bracket_body`)."""
    if not any(closer in code for closer in closes):
        return None
    for at, char in enumerate(code):
        if char in opens:
            depth += 1
        elif char in closes:
            depth -= 1
            if depth < 0:
                return at
    return None


def _inside_string_or_comment(prefix: str, suffix: str, language: Language) -> bool:
    source = (prefix + suffix).encode("utf-8")
    offset = len(prefix.encode("utf-8"))
    tree = parse(language.name, source)
    node = tree.root_node.descendant_for_byte_range(max(offset - 1, 0), max(offset - 1, 0))
    while node is not None:
        if node.type in language.string_or_comment_types and node.start_byte < offset:
            # Right after a closing quote the cursor is outside the string; a comment runs to the
            # end of its line.
            if node.end_byte > offset or (node.type == "comment" and node.end_byte >= offset):
                return True
        node = node.parent
    return False


def completion_shape(prefix: str, suffix: str = "", language: Language = PYTHON) -> CompletionShape:
    """Block or single line at the end of `prefix`; languages without indented blocks complete
    the current line."""
    return replace(_shape_at(prefix, suffix, language), shown=prefix + "\n" + suffix, language=language.name)


# Languages whose blocks a keyword closes: what a line that opens one looks like (its code: strings
# and its comment blanked), and the keyword that closes it. A line that also closes what it opens
# (`if x then y() end`, Ruby's `def area = w * h`) opens none.
_RUBY_OPENER = re.compile(r"^\s*(?:(?:def|class|module|if|unless|while|until|for|case|begin)\b(?!.*\bend\b)"
                          r"(?!\s*[\w.?!]+\s*(?:\([^)]*\))?\s*=[^=~>])"
                          r"|.*\bdo\s*(?:\|[^|]*\|)?\s*$)")
_LUA_OPENER = re.compile(r"(?:\b(?:then|do|else)|\bfunction\b[^()]*\([^()]*\))\s*$")
_KEYWORD_BLOCKS: dict[str, tuple[tuple[re.Pattern[str], str], ...]] = {
    # A block in braces (`items.each { |x|`, `loop {`) and a hash literal over lines end at their own `}`.
    "ruby": ((_RUBY_OPENER, "end"), (re.compile(r"\{\s*(?:\|[^|]*\|\s*)?$"), "}")),
    # A table constructor over lines (`local defaults = {`, `queue:push({`) ends at its own `}`.
    "lua": ((_LUA_OPENER, "end"), (re.compile(r"(?:^|[;\s])repeat\s*$"), "until"), (re.compile(r"\{\s*$"), "}")),
    # The shell's keywords where a command starts (`if x; then`, a `then` line): `echo then` is an argument.
    # A function's body (`deploy() {`, `function deploy {`) is a `{` group closed by its own `}`
    # (`${` and `a{` are expansions, no group).
    # `case x in` runs to its `esac`; one of its arms (`start)`, `-h|--help)`) to its `;;`.
    "bash": ((re.compile(r"(?:^|;)\s*(?:then|else)\s*$"), "fi"), (re.compile(r"(?:^|;)\s*do\s*$"), "done"),
             (re.compile(r"(?:^|[\s;)])\{\s*$"), "}"), (re.compile(r"(?:^|;)\s*case\s.*\sin\s*$"), "esac"),
             (re.compile(r"^\s*\(?[^\s()][^()]*\)\s*$"), ";;")),
}
# Lines at the opener's indent that go on with its block (`else`, `rescue`, `when`): not its end.
_BLOCK_GOES_ON = {"ruby": ("else", "elsif", "when", "in", "rescue", "ensure"), "lua": ("else", "elseif"),
                  "bash": ("else", "elif")}
# A shell `case`'s arms and their `;;` may stand at its own indent: they go on with its body too.
_CASE_ARM = re.compile(r"\s*(?:;;|;&|\(?[^\s()][^()]*\))")
_SCRIPT_NOT_CODE = {
    "ruby": re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|#.*$'),
    "bash": re.compile(r'"(?:\\.|[^"\\])*"|\'[^\']*\'|(?:^|(?<=\s))#.*$'),
    "lua": re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|--.*$'),
}


# The literals and comments of Python (its triple-quoted strings over lines) and of the keyword
# languages (one line each), as `_code` blanks a brace language's: brackets inside them do not count.
_PYTHON_SYNTAX = _BraceSyntax(re.compile(r'(?P<open>"""|\'\'\')|(?P<done>"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|#.*$)'),
                              {'"""': ('"""', True), "'''": ("'''", True)})
_SCRIPT_SYNTAX = {name: _BraceSyntax(re.compile(rf"(?P<done>{pattern.pattern})"), {})
                  for name, pattern in _SCRIPT_NOT_CODE.items()}


def _line_syntax(language: str) -> _BraceSyntax:
    """What `_code` blanks in a line of `language` (a grammar's name), in any language."""
    if language == PYTHON.name:
        return _PYTHON_SYNTAX
    return _SCRIPT_SYNTAX.get(language) or _brace_syntax(language)


_BRACKET_CLOSER = {"(": ")", "[": "]", "{": "}"}


def _bracket_shape(line: str, suffix: str, language: str, openers: str) -> CompletionShape | None:
    """A line whose code ends with a bracket it leaves open (`return (`, `const xs = [`, Python's
    `x = foo(`): the completion runs on to the line that closes it; only where nothing but that
    closer follows the cursor on its line (an editor's auto-paired `)`, `);`). None: no such line."""
    code = _code(line, _START, _line_syntax(language))[0].rstrip()
    if not code or code[-1] not in openers:
        return None
    closer = _BRACKET_CLOSER[code[-1]]
    rest = next(_lines_of(suffix)).strip()
    if rest and not rest.startswith(closer):
        return None
    return CompletionShape(True, _indent(line), line, bracket_closer=closer,
                           closer_indent=line[: len(line) - len(line.lstrip())])


# Brace languages whose block headers may stand without their `{` at the cursor (Allman's `{` on the
# next line, or K&R's ` {` still to come): control statements, and in the C family and PHP a
# function's or method's signature.
_HEADER_LANGUAGES = frozenset({"c", "cpp", "csharp", "java", "javascript", "typescript", "tsx", "php"})
_SIGNATURE_LANGUAGES = frozenset({"c", "cpp", "csharp", "java", "php"})
_BARE_HEADER = re.compile(r"(?:\}\s*)?(?:else|do|try|finally)")
_CONTROL_HEADER = re.compile(r"(?P<closed>\}\s*)?(?:else\s+)?"
                             r"(?P<keyword>if|elseif|for|foreach|while|switch|catch|using|lock|fixed|synchronized)\s*\(")
# Modifiers and a return type, then the name and its `(`: `public static void Main(`, `int *make(`.
_SIGNATURE = re.compile(r"(?P<words>(?:[\w<>\[\],.?*&:$]+\s+)+)[*&]*[~\w$:]+\s*\(")
# First words of a statement that `_SIGNATURE` would take for a return type: `return f(x)`, `new A(x)`.
_NOT_A_SIGNATURE = frozenset({"return", "new", "await", "throw", "yield", "case", "goto", "delete", "typeof", "sizeof",
                              "echo", "print", "else", "do", "using", "co_await", "co_return", "co_yield", "not",
                              "and", "or", "in", "is", "as", "instanceof", "include", "require", "import"})
_AFTER_SIGNATURE = re.compile(r"(?:\s*(?:const|override|final|noexcept|throws\s+[\w.]+(?:\s*,\s*[\w.]+)*))*")


def _is_block_header(code: str, language: str) -> bool:
    """Whether a statement's `code` (literals and comments blanked) is a block's header that its
    `{` has not followed yet: `if (x > 0)`, `} else`, `for (...)`, `try`, or (`_SIGNATURE_LANGUAGES`)
    `public void Deposit(decimal amount)`; its parentheses closed, nothing after them."""
    code = code.strip()
    if _BARE_HEADER.fullmatch(code):
        return True
    found = _CONTROL_HEADER.match(code)
    signature = False
    if found is not None:
        if found["closed"] and found["keyword"] == "while":
            return False  # `} while (x)`: a do-while's end
    elif language in _SIGNATURE_LANGUAGES:
        found = _SIGNATURE.match(code)
        if found is None or found["words"].split()[0] in _NOT_A_SIGNATURE:
            return False
        signature = True
    else:
        return False
    end = _closing_column(code[found.end():], 0, "(", ")")
    if end is None:
        return False
    rest = code[found.end() + end + 1:]
    return not rest.strip() or (signature and _AFTER_SIGNATURE.fullmatch(rest) is not None)


def _block_follows(suffix: str) -> bool:
    """Whether the first line after the cursor's with code starts with `{`: the header has its block."""
    following = itertools.islice(_lines_of(suffix), 1, None)
    return next((line for line in following if line.strip()), "").lstrip().startswith("{")


# Literals of these languages that span lines: a shell or Ruby heredoc (`cat <<EOF`, `<<~SQL`), whose
# text and terminator may stand at column 0, and a Lua long string or comment (`[[`, `--[==[`), which
# may hold `end`. Their lines neither end a block's body nor close it.
_HEREDOC = {
    "bash": re.compile(r"(?<!<)<<(?P<indented>-?)\s*(?P<quote>['\"]?)(?P<word>[A-Za-z_]\w*)(?P=quote)"),
    "ruby": re.compile(r"<<(?P<indented>[~-]?)(?P<quote>['\"`]?)(?P<word>[A-Za-z_]\w*)(?P=quote)"),
}
_LUA_LONG_BRACKET = re.compile(r"\[(=*)\[")


class _OpenLiteral(NamedTuple):
    closer: str  # a heredoc's terminator (a line of its own), or a long bracket's `]]` / `]=]`
    heredoc: bool
    indented: bool = False  # a heredoc whose terminator may be indented (`<<-EOF`, `<<~SQL`)


def _literal_after(line: str, language: str, literal: _OpenLiteral | None) -> _OpenLiteral | None:
    """The literal spanning lines that is open after `line`, given the one open before it (None: none)."""
    if literal is not None:
        if literal.heredoc:
            return None if (line.strip() if literal.indented else line) == literal.closer else literal
        end = line.find(literal.closer)
        if end < 0:
            return literal
        line = line[end + len(literal.closer):]
    if language == "lua":
        while (opened := _LUA_LONG_BRACKET.search(line)) is not None:
            closer = f"]{opened.group(1)}]"
            end = line.find(closer, opened.end())
            if end < 0:
                return _OpenLiteral(closer, heredoc=False)
            line = line[end + len(closer):]
        return None
    heredoc = _HEREDOC[language].search(_SCRIPT_NOT_CODE[language].sub(_blank_unless_quoted_word, line)) \
        if language in _HEREDOC else None
    return _OpenLiteral(heredoc["word"], heredoc=True, indented=bool(heredoc["indented"])) if heredoc else None


def _blank_unless_quoted_word(found: re.Match[str]) -> str:
    """A string or comment blanked, but a quoted word kept: a heredoc's quoted terminator (`<<'EOF'`)."""
    text = found.group()
    return text if re.fullmatch(r"(['\"`])\w+\1", text) else " " * len(text)


def _keyword_closer(line: str, language: str) -> str:
    """The keyword closing the block `line` opens in `language`, "" where it opens none."""
    code = _SCRIPT_NOT_CODE[language].sub("", line).rstrip()
    return next((closer for opener, closer in _KEYWORD_BLOCKS[language] if opener.search(code)), "")


def _closes_with(line: str, closer: str) -> bool:
    """Whether `line` is the keyword `closer` (`end`, `end)`, `end.map`, `fi;`...)."""
    word = line.strip()
    return word.startswith(closer) and (len(word) == len(closer) or not (word[len(closer)].isalnum()
                                                                          or word[len(closer)] == "_"))


def _shape_at(prefix: str, suffix: str, language: Language) -> CompletionShape:
    lines = prefix.split("\n")
    current = lines[-1]
    if not language.indented_blocks and not language.brace_blocks and language.name not in _KEYWORD_BLOCKS:
        return CompletionShape(False, -1, current)
    if _inside_string_or_comment(prefix, suffix, language):
        return CompletionShape(False, -1, current)
    if language.name in _KEYWORD_BLOCKS:
        # At the end of an opener, or on a blank line below one, as in Python.
        at = len(lines) - 1 if current.strip() else next(
            (n for n in range(len(lines) - 2, -1, -1) if lines[n].strip()), -1)
        closer = _keyword_closer(lines[at], language.name) if at >= 0 else ""
        # Not before code on the cursor's line (`items.each { |x| |}`, an editor's auto-paired brace).
        if closer and not next(_lines_of(suffix)).strip():
            return CompletionShape(True, _indent(lines[at]), current, keyword_closer=closer)
        bracket = _bracket_shape(current, suffix, language.name, "([") if current.strip() else None
        return bracket or CompletionShape(False, -1, current)
    if language.brace_blocks:
        at = len(lines) - 1 if current.strip() else next(
            (n for n in range(len(lines) - 2, -1, -1) if lines[n].strip()), -1)
        opener = lines[at] if at >= 0 else ""
        syntax = _brace_syntax(language.name)
        if opener and (at == len(lines) - 1 or not current.strip()):
            statement = lines[_statement_start(lines, at)]
            if _opens_brace_block(opener, syntax):
                return CompletionShape(True, _indent(statement), current, brace_block=True,
                                       closer_indent=statement[: len(statement) - len(statement.lstrip())])
            # A body without braces (`object Main:`, `fun area(): Int =`): as Python's, to a dedent;
            # not before code on the cursor's line (`val x = |y`).
            if _opens_indented_body(opener, syntax) and not next(_lines_of(suffix)).strip():
                return CompletionShape(True, _indent(statement), current)
            if at == len(lines) - 1:
                bracket = _bracket_shape(current, suffix, language.name, "([")
                if bracket is not None:
                    return bracket
                # A header whose `{` is still to come, at the end of its line (not on the blank
                # line below it: there the first real line is completed, as before).
                if language.name in _HEADER_LANGUAGES and not next(_lines_of(suffix)).strip() \
                        and not _block_follows(suffix) and _is_block_header(" ".join(
                            _code(line, _START, syntax)[0] for line in lines[_statement_start(lines, at):]),
                            language.name):
                    return CompletionShape(True, _indent(statement), current, header=True,
                                           closer_indent=statement[: len(statement) - len(statement.lstrip())])
        return CompletionShape(False, -1, current)
    # The body is indented from the statement's first line: PEP 8's `def long_function_name(`
    # with a hanging `        var_four):` has its body at 4, not deeper than the `):` line.
    if current.strip() and _opens_block(current):
        return CompletionShape(True, _indent(lines[_python_statement_start(lines, len(lines) - 1)]), current)
    if not current.strip():
        at = next((n for n in range(len(lines) - 2, -1, -1) if lines[n].strip()), -1)
        if at >= 0 and _opens_block(lines[at]):
            return CompletionShape(True, _indent(lines[_python_statement_start(lines, at)]), current)
        return CompletionShape(False, -1, current)
    return _bracket_shape(current, suffix, PYTHON.name, "([{") or CompletionShape(False, -1, current)


def _python_statement_start(lines: list[str], at: int) -> int:
    """`_statement_start` in Python: its strings and `#` comments (`//` divides), dict braces too."""
    return _statement_start(lines, at, _PYTHON_NOT_CODE, "()[]{}")


def clean_completion(
    raw: str, shape: CompletionShape, sentinels: tuple[str, ...] = (), suffix: str = "", max_lines: int = 16,
    capped: bool = False,
) -> str:
    """`capped`: generation was stopped, not ended by the model (the token cap, the deadline:
    Generation.finish_reason "length" / "deadline"), so the last line of a multi-line answer is
    cut off in its middle (`_without_cut_off_line`)."""
    return _cleaned(raw, shape, sentinels, suffix, max_lines, capped)[0]


def completion_settled(
    raw: str, shape: CompletionShape, sentinels: tuple[str, ...] = (), suffix: str = "", max_lines: int = 16
) -> bool:
    """Whether `clean_completion` of `raw` followed by any further text is already that of `raw`:
    generation can stop here (the tokens after it would all be cut). Decided only on complete
    lines, or on a partial line that already ends the body (its indent, a top-level keyword).
    A line that loops (`loop_end`) ends the text there: what follows cannot make it right."""
    return _cleaned(raw, shape, sentinels, suffix, max_lines)[1]


def _cleaned(raw: str, shape: CompletionShape, sentinels: tuple[str, ...], suffix: str,
             max_lines: int, capped: bool = False) -> tuple[str, bool]:
    """(the completion, settled): see `clean_completion` and `completion_settled`."""
    text = raw
    cut = False  # a sentinel ends the model's text: nothing after it counts
    for sentinel in sentinels:
        at = text.find(sentinel)
        if at >= 0:
            text, cut = text[:at], True
    # Line ends as the file reader normalizes them (index.scan.normalize_newlines): a lone `\r`
    # (old Mac line ends) is a line break too, not a character shown inside a line.
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    looped = False  # a line loops: it ends there, and nothing after it counts
    for at, line in enumerate(lines):
        end = loop_end(line, shape.shown)
        if end is not None:
            lines, looped = [*lines[:at], line[:end]], True
            break
    if capped and shape.multiline and not cut and not looped:
        lines = _without_cut_off_line(lines)
    if not shape.multiline or _answers_on_its_line(lines[0], shape):
        at = 0
        if not lines[0].strip() and not shape.line_prefix.strip():
            # On a blank line the model may start with a newline: take its first real line.
            at = next((i for i, line in enumerate(lines) if line.strip()), len(lines) - 1)
        first = lines[at].lstrip() if at > 0 and shape.line_prefix else lines[at]
        line_rest = next(_lines_of(suffix))
        settled = cut or looped or at < len(lines) - 1
        if _echoes_next_line(shape.line_prefix + first, line_rest, suffix):
            return "", settled
        first = _without_line_rest_echo(first.rstrip(), shape.line_prefix, line_rest)
        return _without_extra_closers(first, shape.line_prefix, line_rest), settled
    lines = _from_the_cursor_line(lines, shape)
    glued = False  # the bracket's closing line held code before an auto-paired closer: it stays glued to it
    if shape.bracket_closer:
        kept, settled, glued = _bracket_body(lines, suffix, shape, max_lines)
    elif shape.header:
        kept, settled = _header_body(lines, shape, max_lines)
    elif shape.brace_block:
        kept, settled = _brace_body(lines, suffix, max_lines, shape.block_indent, _brace_syntax(shape.language))
    elif shape.keyword_closer:
        kept, settled = _keyword_body(lines, suffix, shape, max_lines)
    else:
        kept, settled = _indented_body(lines, shape, max_lines)
    complete = len(kept) if settled or cut or looped else len(lines) - 1  # kept[:complete] can no longer change
    kept, repeated = _cut_repetition(kept, complete)
    kept = _drop_suffix_echo(kept, suffix, shape.line_prefix)
    while kept and not kept[-1].strip():
        kept.pop()
    text = "\n".join(line.rstrip() for line in kept)
    if shape.brace_block and text.strip() and next(_lines_of(suffix)).startswith("}"):
        if "\n" in text:
            # `{|}` (an editor's auto-paired brace): the body's last line would end glued to that
            # `}` (`return x;}`); it goes on a line of its own, at the opener's indent.
            text += "\n" + shape.closer_indent
        elif kept[-1].endswith(" "):
            text += " "  # `{ ok: true |}`: the space the model wrote before the brace stays
    if shape.bracket_closer and "\n" in text and not glued \
            and next(_lines_of(suffix)).strip().startswith(shape.bracket_closer):
        # `return (|)` (an editor's auto-paired `)`): the lines inside go above it, on a line of its own.
        text += "\n" + shape.closer_indent
    return text, settled or cut or looped or repeated


def _answers_on_its_line(line: str, shape: CompletionShape) -> bool:
    """Whether the answer's first line, `line`, makes it a one-line completion in a shape that may
    run over lines: it closes the bracket the cursor's line left open (`foo(|` answered `a, b)`),
    or it goes on with a header's statement itself (`if (x) |` answered `return 1;`, not ` {`).
    Such an answer is cleaned as one line, as before these shapes (the line's rest not repeated)."""
    if shape.bracket_closer:
        return _closing_column(_code(line, _START, _line_syntax(shape.language))[0], 0, "([{", ")]}") is not None
    if shape.header:
        return bool(line.strip()) and not line.lstrip().startswith("{")
    return False


def _without_cut_off_line(lines: list[str]) -> list[str]:
    """An answer stopped in the middle of its last line (`clean_completion`'s `capped`), without
    that line: code cut anywhere (`    int size() co`), and a line the checks on whole lines (the
    code after the cursor written again, `_drop_suffix_echo`) cannot match. Kept where it is the
    answer's only line with code (a line cut short shows more than nothing, as a one-line
    completion's does), or where it is closers alone (`}`, `});`: whole as they stand)."""
    if len(lines) < 2 or not any(line.strip() for line in lines[:-1]) or set(lines[-1]) <= set(" \t}]);,"):
        return lines
    return lines[:-1]


def _bracket_body(lines: list[str], suffix: str, shape: CompletionShape,
                  max_lines: int) -> tuple[list[str], bool, bool]:
    """Lines up to the one holding the closer of the bracket the cursor's line left open, that
    line whole (`);`, the `))}` of JSX's `{items.map((todo) => (`) and nothing after it; where the
    code after the cursor has that closer already (an editor's auto-paired `)`), what that line
    holds before it. A line not indented deeper than the cursor's that does not start with a
    closer (the next statement), in Python a new top-level statement, or a line whose first closer too
    many is another kind of bracket (a block around the statement closes) ends the lines before it.
    Settled: the closing line is complete, or that line has begun, or the last line `max_lines`
    allows is complete. Also: whether code stood before the auto-paired closer on its line."""
    syntax = _line_syntax(shape.language)
    auto_paired = next(_lines_of(suffix)).strip().startswith(shape.bracket_closer)
    kept: list[str] = []
    depth, scan = 0, _START
    for at, line in enumerate(lines):
        complete = at < len(lines) - 1
        inside = bool(scan.closer)  # the line starts inside a literal or comment: its indent is text
        code, scan = _code(line, scan, syntax)
        stripped = line.lstrip()
        if at > 0 and stripped and not inside and stripped[0] not in _CLOSERS and (
                _indent(line) <= shape.block_indent or (shape.language == PYTHON.name and _TOP_LEVEL.match(line))):
            return kept, True, False
        column = _closing_column(code, depth, "([{", ")]}")
        if column is not None:
            if code[column] != shape.bracket_closer:
                return kept, complete, False  # `}` for `[`: a block around the statement closes, not the bracket
            if not auto_paired:
                kept.append(line)
                return kept, complete, False
            before = line[:column]
            if before.strip():
                kept.append(before)
            return kept, complete, bool(before.strip())
        depth += _bracket_depth(code)
        kept.append(line)
        if len(kept) >= max_lines:
            return kept, complete, False
    return kept, False, False


def _header_body(lines: list[str], shape: CompletionShape, max_lines: int) -> tuple[list[str], bool]:
    """After a block's header whose `{` is still to come (`if (amount > Balance)`): the block, its
    `{` on the answer's first line (K&R's ` {`) or a later one (Allman's), to the `}` balancing it;
    a body without braces (one statement, indented below the header) to a dedent."""
    first = next((at for at, line in enumerate(lines) if line.strip()), None)
    if first is None:
        return lines, False
    line = lines[first]
    if not line.lstrip().startswith("{"):
        return _indented_body(lines, shape, max_lines)
    column = len(line) - len(line.lstrip()) + 1  # just after the `{`
    # The block is the answer's own: the code after the cursor closes none of it (suffix "").
    body, settled = _brace_body([line[column:], *lines[first + 1:]], "", max(max_lines - first, 1),
                                shape.block_indent, _brace_syntax(shape.language))
    return [*lines[:first], line[:column] + (body[0] if body else ""), *body[1:]], settled


@functools.cache
def _any_loop(repeats: int) -> re.Pattern[str]:
    """A unit of 2-16 characters `repeats` times in a row, one-character units included."""
    return re.compile(rf"(.{{2,16}}?)\1{{{repeats - 1},}}")


def loop_end(line: str, shown: str = "", repeats: int = LOOP_REPEATS) -> int | None:
    """Where the line's first generation loop ends (`%s, %s, %s, …`, `TypeVar, TypeVar, …`): the
    earliest end of a unit of 2-16 characters written `repeats` times in a row, or where such a
    run grows past what `shown` (the file's text) holds as written; None without one. Such a line
    otherwise runs to the token cap (2 s of a warm completion in the editor walk). A unit of one
    character repeated (`# ------` separators) is no loop, and a unit that repeats a shorter one
    is judged as that."""
    if len(line) < 2 * repeats or _any_loop(repeats).search(line) is None:
        return None  # the common case, per token and line, decided in C (a third of the scan's time)
    first = None
    for unit in range(2, 17):
        run = 0  # positions i so far, in a row, with line[i] == line[i - unit]
        for i in range(unit, len(line) if first is None else min(len(line), first)):
            if line[i] != line[i - unit]:
                run = 0
                continue
            run += 1
            # The run so far, from its first unit: the file may show it (a table's rows), but
            # not longer than it shows it.
            if (run >= (repeats - 1) * unit and not _repeats_a_shorter_unit(line[i + 1 - unit:i + 1])
                    and line[i + 1 - run - unit:i + 1] not in shown):
                first = i + 1
                break
    return first


def _repeats_a_shorter_unit(unit: str) -> bool:
    """`-----` or `0, 0, `: a run of it is a run of the shorter unit, judged as that (one
    character repeated is written on purpose; `0, ` against what the file shows)."""
    return unit in (unit + unit)[1:-1]


def _lines_of(text: str) -> Iterator[str]:
    """`text.split("\n")`, one line at a time (callers that stop early read no further)."""
    start = 0
    while (end := text.find("\n", start)) >= 0:
        yield text[start:end]
        start = end + 1
    yield text[start:]


def _suffix_closes_block(suffix: str, block_indent: int, syntax: _BraceSyntax = _ANY_BRACES) -> bool:
    """Whether the code after the cursor closes the opener's block: its line's rest starts with `}`
    (an editor's auto-paired brace), or a later line starting with `}` stands at the opener's
    indent, outside any block the suffix opens, before any line outdented past it (a `}` farther
    out closes an enclosing block: a `match x {` typed as a function's last statement is still
    open; a `for` below a new `if err != nil {` closes its own). Lines of comments, of literals
    and of preprocessor directives (`#ifdef` at column 0, a raw string's SQL) are no outdent."""
    lines = _lines_of(suffix)
    rest = next(lines)
    if rest.strip().startswith("}"):
        return True
    _, scan = _code(rest, _START, syntax)
    depth = 0  # blocks the suffix opens itself: a later sibling's `}` closes its own block
    for line in lines:
        inside = scan.closer  # the line starts inside a literal or comment: its indent is text
        code, scan = _code(line, scan, syntax)
        if not code.strip():
            continue
        if not inside:
            if _indent(code) < block_indent:
                return False
            if depth == 0 and _indent(code) == block_indent and code.strip().startswith("}"):
                return True
        depth += code.count("{") - code.count("}")
        if depth < 0:
            return False
    return False


def _brace_body(lines: list[str], suffix: str, max_lines: int, block_indent: int = -1,
                syntax: _BraceSyntax = _ANY_BRACES) -> tuple[list[str], bool]:
    """Lines up to the one whose braces close the opener's block; that line only when the code
    after the cursor does not close it already (`_suffix_closes_block`). Settled: that line, or the
    last one `max_lines` allows, is complete. Braces in literals and comments, over lines too, and
    in an `#else` branch (`syntax`) do not count."""
    kept: list[str] = []
    depth = 0
    scan = _START
    closed_by_suffix: bool | None = None  # asked once, at the first line that closes the opener's block
    for at, line in enumerate(lines):
        complete = at < len(lines) - 1
        code, scan = _code(line, scan, syntax)
        column = _closing_column(code, depth)
        if column is not None:
            closed_by_suffix = _suffix_closes_block(suffix, block_indent, syntax) if closed_by_suffix is None \
                else closed_by_suffix
            if closed_by_suffix:
                # The code after the cursor closes the block: what the line holds before its brace
                # (`X: 1, Y: 2}` of `Point{|}`) is the body's, the brace and the rest (`} else {`
                # again) are the suffix's.
                before = line[:column]
                if before.strip():
                    kept.append(before)
                return kept, complete
        depth += code.count("{") - code.count("}")
        if depth < 0:
            kept.append(line)
            return kept, complete
        kept.append(line)
        if len(kept) >= max_lines:
            return kept, complete
    return kept, False


def _indented_body(lines: list[str], shape: CompletionShape, max_lines: int) -> tuple[list[str], bool]:
    """Lines up to a dedent to the opener's indent or a new top-level statement. Settled: a line
    that ends the body has begun (its indent and any keyword stay as the line grows), or the last
    line `max_lines` allows is complete. Lines inside a triple-quoted string (an SQL query, a
    docstring's text at column 0) end nothing, nor does a line at the opener's indent that closes a
    bracket the body left open (`)` of Kotlin's `val xs =` completed `listOf(` and its items)."""
    kept = [lines[0]]
    not_code = _NOT_CODE if shape.language in _BRACE_SYNTAX else _PYTHON_NOT_CODE
    open_string = _open_triple_quote(lines[0], None)
    depth = _bracket_depth(not_code.sub("", lines[0]))  # brackets the body opened and left open
    for at in range(1, len(lines)):
        line = lines[at]
        if line.strip() and open_string is None:
            closes_body_bracket = depth > 0 and _indent(line) == shape.block_indent and line.lstrip()[0] in _CLOSERS
            if (_indent(line) <= shape.block_indent and not closes_body_bracket) or _TOP_LEVEL.match(line):
                return kept, True
            depth += _bracket_depth(not_code.sub("", line))
        open_string = _open_triple_quote(line, open_string)
        kept.append(line)
        if len(kept) >= max_lines:
            return kept, at < len(lines) - 1
    return kept, False


def _keyword_body(lines: list[str], suffix: str, shape: CompletionShape, max_lines: int) -> tuple[list[str], bool]:
    """Lines indented deeper than the opener, up to the first that is not; when that line is the
    block's closing keyword at the opener's indent (`end`), it ends the completion too, unless the
    code after the cursor closes the block already (an editor that writes `end` with the opener).
    Settled: the body ended (its closer whole), or the last line `max_lines` allows is complete.
    Lines of a heredoc or a Lua long string (`_literal_after`) are text: they end nothing."""
    kept = [lines[0]]
    literal = _literal_after(lines[0], shape.language, None)
    for at in range(1, len(lines)):
        line = lines[at]
        if literal is not None:  # a heredoc's or long string's line: text, whatever its indent
            literal = _literal_after(line, shape.language, literal)
        elif line.strip() and _indent(line) <= shape.block_indent:
            if _indent(line) == shape.block_indent:
                words = (*_BLOCK_GOES_ON[shape.language], shape.keyword_closer)
                if at == len(lines) - 1 and (shape.keyword_closer == "esac" or any(
                        word.startswith(line.strip()) or _closes_with(line, word) for word in words)):
                    return kept, False  # `en` of `end`, `els` of `else`, a `case` arm's pattern: not decided yet
                if any(_closes_with(line, word) for word in _BLOCK_GOES_ON[shape.language]) \
                        or (shape.keyword_closer == "esac" and _CASE_ARM.match(line) is not None):
                    kept.append(line)
                    continue
                if _closes_with(line, shape.keyword_closer):
                    if not _suffix_closes_keyword_block(suffix, shape):
                        kept.append(line)
                    return kept, True
            return kept, True
        else:
            literal = _literal_after(line, shape.language, None)
        kept.append(line)
        if len(kept) >= max_lines:
            return kept, at < len(lines) - 1
    return kept, False


def _suffix_closes_keyword_block(suffix: str, shape: CompletionShape) -> bool:
    """Whether the first line after the cursor's that is not indented deeper than the opener is
    the block's closing keyword at the opener's indent."""
    lines = _lines_of(suffix)
    literal = _literal_after(next(lines), shape.language, None)
    for line in lines:
        if literal is None and line.strip() and _indent(line) <= shape.block_indent:
            return _indent(line) == shape.block_indent and _closes_with(line, shape.keyword_closer)
        literal = _literal_after(line, shape.language, literal)
    return False


def _from_the_cursor_line(lines: list[str], shape: CompletionShape) -> list[str]:
    """On a blank line below an opener the body starts at the cursor: line breaks the model wrote
    before its first line (which would leave the cursor's line blank, its indentation trailing) are
    dropped, and that line loses the indentation the cursor's line already has, as a one-line
    completion there does. A first line that is no body line (a dedent) is left to end the body."""
    if shape.line_prefix.strip() or lines[0].strip():
        return lines
    first = next((at for at, line in enumerate(lines) if line.strip()), None)
    if first is None:
        return lines[-1:]  # no line yet: the breaks so far may all go, nothing is settled by them
    if _indent(lines[first]) <= shape.block_indent:
        return lines
    line = lines[first]
    line = line[len(shape.line_prefix):] if line.startswith(shape.line_prefix) else line.lstrip()
    return [line, *lines[first + 1:]]


def _open_triple_quote(line: str, open_string: str | None) -> str | None:
    """The triple quote (three double or three single quotes) a string left open after `line` is
    in, given the one open before it (None: none); quotes inside a one-line string or a comment are
    not told apart."""
    at = 0
    while True:
        if open_string is None:
            starts = [(line.find(mark, at), mark) for mark in ('"""', "'''")]
            found = min(((i, mark) for i, mark in starts if i >= 0), default=None)
            if found is None:
                return None
            open_string, at = found[1], found[0] + 3
        else:
            end = line.find(open_string, at)
            if end < 0:
                return open_string
            open_string, at = None, end + 3


def _cut_repetition(lines: list[str], complete: int, limit: int = 3,
                    longest_unit: int = LOOP_UNIT_LINES) -> tuple[list[str], bool]:
    """Stop where a run of 1 to `longest_unit` lines is written for the `limit`-th time in a row
    (a generation loop; blank lines aside, indentation counted, so the `}` closing three nested
    blocks or three `except KeyError:` clauses around different bodies are no loop); and whether
    that cut is final (it falls in the first `complete` lines, which can no longer change)."""
    content = [i for i, line in enumerate(lines) if line.strip()]
    keys = [lines[i].rstrip() for i in content]
    for last in range(len(keys)):
        for unit in range(1, longest_unit + 1):
            first = last - unit * limit + 1  # the first line of the first of the `limit` units
            if first < 0:
                break
            if all(keys[j] == keys[j - unit] for j in range(first + unit, last + 1)):
                position = content[last - unit + 1]  # the first line of the last unit
                return lines[:position], position < complete
    return lines, False


# Closing brackets and the openers they balance.
_CLOSERS = {")": "(", "]": "[", "}": "{"}
# String and character literals (any quote, one line): their brackets do not count.
_STRING_LITERALS = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`(?:\\.|[^`\\])*`')


def _without_extra_closers(completion: str, line_prefix: str, line_rest: str) -> str:
    """A one-line completion with the closing brackets it ends with taken off where the code after
    the cursor on its line already closes them (`sum(price(|))` completed `item) for item in
    items)` would leave one `)` too many): each trailing closer goes while the line would hold more
    of it than of its opener."""
    if not completion or not line_rest.strip() or completion[-1] not in _CLOSERS:
        return completion
    line = _STRING_LITERALS.sub("", line_prefix + completion + line_rest)
    excess = {closer: line.count(closer) - line.count(opener) for closer, opener in _CLOSERS.items()}
    while completion and excess.get(completion[-1], 0) > 0 and line_rest.lstrip().startswith(completion[-1]):
        excess[completion[-1]] -= 1
        completion = completion[:-1].rstrip()
    return completion


def _bracket_depth(code: str) -> int:
    """How many more brackets the `code` opens than it closes."""
    return sum(code.count(opener) - code.count(closer) for closer, opener in _CLOSERS.items())


def _bracket_imbalance(line: str) -> int:
    """How far the line's brackets are from balanced, counted per kind (strings left out)."""
    code = _STRING_LITERALS.sub("", line)
    return sum(abs(code.count(closer) - code.count(opener)) for closer, opener in _CLOSERS.items())


def _without_line_rest_echo(completion: str, line_prefix: str, line_rest: str) -> str:
    """A one-line completion in the middle of a line, without the line's rest where it writes that
    again (`console.log(|);` completed `total);`, `if (|) {` completed `x > 0) {`): cut where the
    line then balances its brackets better, or as well where the rest is punctuation only (`;`).
    `f(|)` completed `g(x)` keeps its `)`: the line balances only with it."""
    rest = line_rest.strip()
    if not rest or not completion.endswith(rest):
        return completion
    shorter = completion[: len(completion) - len(rest)].rstrip()
    if not shorter:
        return ""  # the rest alone, which the line already has (`x, err |:= f()` completed `:= f()`)
    with_echo = _bracket_imbalance(line_prefix + completion + line_rest)
    without = _bracket_imbalance(line_prefix + shorter + line_rest)
    if without < with_echo or (without == with_echo and not any(char.isalnum() for char in rest)):
        return shorter
    return completion


def _echoes_next_line(line: str, line_rest: str, suffix: str) -> bool:
    """Whether a one-line completion, `line` as it would stand, is the next line already after the
    cursor (indentation included): small models often skip the line the user is about to write
    and go on with the one below, which the editor would then show twice. Only where nothing
    follows the cursor on its line."""
    if not line.strip() or line_rest.strip():
        return False
    following = itertools.islice(_lines_of(suffix), 1, None)
    next_line = next((candidate for candidate in following if candidate.strip()), None)
    if next_line is None:
        return False
    if not line.strip().strip("".join(_CLOSERS) + ";,"):
        return next_line.strip() == line.strip()  # a `}` below at another indent is no other line
    return next_line.rstrip() == line.rstrip()


def _drop_suffix_echo(lines: list[str], suffix: str, line_prefix: str = "") -> list[str]:
    """Drop trailing lines that repeat the first lines already after the cursor, indentation
    included (stripped, a nested block's `}` was taken for the `}` after the cursor and dropped:
    the loop ending a Go function was left open). The first line of each, the cursor line's
    rest, is compared stripped; where that rest is blank, the completion's first line is compared
    as it would stand, after `line_prefix` (the cursor's indentation on a blank line: its body
    `    return 1` was not the `    return 1` below, and was shown twice)."""

    def key(at: int, line: str) -> str:
        return line.strip() if at == 0 else line.rstrip()

    def own_key(at: int, line: str) -> str:
        return (line_prefix + line).rstrip() if at == 0 and rest_blank else key(at, line)

    rest_blank = not next(_lines_of(suffix)).strip()
    content = [i for i, line in enumerate(lines) if line.strip()]
    # As many of the suffix's non-blank lines as the completion has: this runs at every token, and
    # the suffix may be the rest of a long file (splitting all of it was 0.34 ms a token on 100 kB).
    following = list(itertools.islice((key(at, line) for at, line in enumerate(_lines_of(suffix))
                                       if line.strip()), len(content)))
    if not following:
        return lines
    for size in range(min(len(content), len(following)), 0, -1):
        tail = [own_key(i, lines[i]) for i in content[-size:]]
        if tail == following[:size]:
            return lines[: content[-size]]
    return lines
