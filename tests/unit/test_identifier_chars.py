"""The rule of a word in any script (repomem/index/identifier_chars.py) against Python's own
definitions: identifiers (`str.isidentifier`), decimal digits (`\\d`), for every code point."""

from __future__ import annotations

import os
import re
import signal
import threading
import time

import numpy as np

from repomem.config import Config
from repomem.index import identifier_chars
from repomem.index.identifier_chars import (
    ASCII_PATTERN,
    DIGIT,
    N_CODE_POINTS,
    WORD_CONTINUE,
    WORD_START,
    ascii_classes,
    word_classes,
    word_pattern,
)
from repomem.index.tokens import line_tokens, tokenize


def _every_code_point() -> str:
    codes = np.arange(N_CODE_POINTS, dtype=np.uint32)
    codes[0xD800:0xE000] = 0x20  # surrogates cannot be decoded from UTF-32; they separate words anyway
    return codes.tobytes().decode("utf-32-le")


def test_classes_are_pythons_identifier_and_digit_rules_for_every_code_point():
    """Outside the classified planes nothing starts, continues or is a digit (so the table need not
    be worked out there), and inside them each bit is what Python says."""
    classes = word_classes()
    text = _every_code_point()
    assert classes.shape == (N_CODE_POINTS,) and len(text) == N_CODE_POINTS
    starts = {code for code in range(N_CODE_POINTS) if text[code].isidentifier()}
    assert set(np.flatnonzero(classes & WORD_START).tolist()) == starts
    digits = {m.start() for m in re.finditer(r"\d", text)}
    assert set(np.flatnonzero(classes & DIGIT).tolist()) == digits
    continues = {code for code in range(N_CODE_POINTS) if ("a" + text[code]).isidentifier()}
    assert set(np.flatnonzero(classes & WORD_CONTINUE).tolist()) == continues
    np.testing.assert_array_equal(classes[:128], ascii_classes())


def test_the_pattern_is_the_ascii_one_in_ascii_and_matches_the_classes():
    pattern = re.compile(word_pattern())
    ascii_text = "".join(map(chr, range(128))) + " get_user_name2 9x _ __a 12_3 "
    assert pattern.findall(ascii_text) == re.findall(ASCII_PATTERN, ascii_text)
    text = "größe naïve_2 ユーザー名 x١٢ ١٢x हिन्दी \u00b2x _\u00b2 a\u3001b Ａｂｃ \U00020000x"
    assert pattern.findall(text) == ["größe", "naïve_2", "ユーザー名", "x١٢", "١٢", "x", "हिन्दी", "x", "_",
                                     "a", "b", "Ａｂｃ", "\U00020000x"]


def test_words_in_other_scripts_are_whole_tokens_and_split_by_case():
    """Accented words are one token (ASCII-only words cut `größe` into `gr` and `e`); camel case
    and snake case split as in ASCII; letters without case are a part of their own."""
    config = Config().bm25
    assert tokenize("größeBerechnen(naïve, système)", config) == [
        "größeberechnen", "größe", "berechnen", "naïve", "système"]
    assert tokenize("ユーザー名Get Ærø_skøbing", config) == [
        "ユーザー名get", "ユーザー名", "get", "ærø_skøbing", "ærø", "skøbing"]
    assert tokenize("हिन्दी", config) == ["हिन्दी"]  # its vowel signs are marks: one word, one part
    # English code tokenizes as before.
    assert tokenize("get_user_name(HTTPResponse, 42)", config) == [
        "get_user_name", "get", "user", "name", "httpresponse", "http", "response", "42"]
    tokens = line_tokens("x = größe\ny = größe", config)
    assert tokens.words == ("x", "größe", "y") and tokens.ids.tolist() == [0, 1, 2, 1]


def test_a_child_forked_while_another_thread_builds_the_table_builds_its_own(monkeypatch):
    """The table's lock held by a thread of the parent when it forked (a language server's edit
    tokenized while a parse worker starts) is free in the child: it waited on it forever."""
    monkeypatch.setattr(identifier_chars, "_classes", None)
    building = threading.Event()
    real_class_of = identifier_chars._class_of

    def slow_class_of(char: str) -> int:
        if char == "\x00":
            building.set()
            time.sleep(0.3)
        return real_class_of(char)

    monkeypatch.setattr(identifier_chars, "_class_of", slow_class_of)
    builder = threading.Thread(target=identifier_chars.word_classes)
    builder.start()
    assert building.wait(10)
    pid = os.fork()
    if pid == 0:  # the child: the table within 10 s, or killed by the alarm
        signal.alarm(10)
        try:
            identifier_chars.word_classes()
        finally:
            os._exit(0)
    builder.join()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
