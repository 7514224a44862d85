"""Secret masking measured on the corpus (tests/data/secrets, tests/secret_corpus.py): secrets in
many shapes across Python, shell, YAML, notebooks, TOML, INI, JavaScript, TypeScript and Go, and
look-alikes that must stay. scripts/bench_secrets.py reports the same figures with real repositories."""

from __future__ import annotations

import random

from repomem.index.secrets import MASK, mask_secrets
from tests.secret_corpus import HeardText, corpus_files, leaked, score

MIN_RECALL = 0.99  # DESIGN.md section 7
MAX_FALSE_POSITIVE_RATE = 0.0  # no look-alike and no ordinary corpus line is changed


def test_masking_catches_the_corpus_secrets_and_leaves_its_look_alikes():
    files = corpus_files()
    result = score(files, lambda text: mask_secrets(text)[0])
    languages = {file.path.rsplit(".", 1)[-1] for file in files}
    assert {"py", "sh", "yml", "ipynb", "toml", "ini", "js", "ts", "go", "lock", "json", "md", "html", "txt",
            "cfg"} <= languages
    assert len(result.shapes(secret=True)) >= 150 and result.secrets >= 250 and result.lookalikes >= 100
    issuers = {planted.shape.split("-provider-", 1)[1] for file in files for planted in file.planted
               if planted.secret and "-provider-" in planted.shape}
    assert len(issuers) >= 100  # token formats of distinct issuers (and unlisted prefixes), each in two file types
    assert result.recall >= MIN_RECALL, "\n".join(result.missed)
    assert result.lookalike_false_positive_rate <= MAX_FALSE_POSITIVE_RATE, "\n".join(result.altered)
    assert result.ordinary_false_positive_rate <= MAX_FALSE_POSITIVE_RATE, "\n".join(result.altered)


def test_each_corpus_file_masks_to_the_same_lines_and_stays_masked():
    """Masking keeps every line break (line numbers, windows and cursors do not move) and a masked
    text has nothing left to mask."""
    for file in corpus_files():
        masked, count = mask_secrets(file.text)
        assert masked.count("\n") == file.text.count("\n"), file.path
        assert (count > 0) == any(planted.secret for planted in file.planted), file.path
        assert mask_secrets(masked) == (masked, 0), file.path
        assert (MASK in masked) == (count > 0), file.path


def test_the_corpus_is_generated_the_same_on_every_run():
    first, second = corpus_files(), corpus_files()
    assert [file.text for file in first] == [file.text for file in second]
    values = [planted.value for file in first for planted in file.planted]
    assert len(set(values)) > 0.9 * len(values)  # a few look-alikes repeat on purpose (one run id, twice)


def test_a_secret_masked_in_part_counts_as_leaked():
    secret = "9fK2pX7qLmN4vB8wR1tY6zH3"
    assert leaked(secret, f"x = '{secret[:12]}[REDACTED]'")  # the first 12 characters are left
    assert not leaked(secret, "x = '[REDACTED]'") and not leaked(secret, f"x = '{secret[:7]}'")


def test_heard_text_finds_a_stretch_exactly_where_the_whole_text_holds_it():
    """The end-to-end leak search looks in the distinct pieces of what a server heard: the same
    answer as a search of the whole text, for every stretch of it and stretches it lacks."""
    rng = random.Random(7)
    alphabet = ["a", "b", "n", "\\", "\n", '"', "x"]
    for _ in range(200):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        heard = HeardText(text + "\n" + text[::-1])
        whole = heard.whole
        stretches = {whole[i:j] for i in range(len(whole)) for j in range(i + 1, min(len(whole), i + 9) + 1)}
        stretches |= {"".join(rng.choice(alphabet) for _ in range(rng.randint(1, 8))) for _ in range(50)}
        for stretch in stretches:
            assert (stretch in heard) == (stretch in whole), (text, stretch)
