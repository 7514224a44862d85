"""Prompt templates per model family: plain left-to-right, fill-in-the-middle, repo-level form.

The strings are exact (docs/design.md section 4): Code Llama's spaces matter, and vLLM's completions
endpoint has no `suffix` field, so the FIM string is rendered here for every backend.

Repository text never carries a special token into a prompt: tokenizers read the text of one
(`<|endoftext|>`, `<|fim_middle|>`, `<PRE>`) as that control token wherever it stands (llama.cpp
with special tokens parsed, and vLLM's tokenizers always), so a tokenizer's source or a chat
template in the repository ended the document, opened the middle early or began a file section
inside the prompt. Each template method writes its content through `Template.plain`, which breaks
every such text with a zero-width space after its first character: the model reads the characters,
every backend alike, and the token counts stay those of what is sent. `Template.restored` turns
the broken form back where the model copies it into a completion.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from repomem.prompt_names import one_line

# U+200B ZERO WIDTH SPACE: not whitespace to the pre-tokenizers (\s leaves it) and invisible.
SPECIAL_BREAK = "\u200b"


@dataclass(frozen=True)
class Template:
    family: str  # "codellama" | "qwen" | "starcoder" | "plain"
    fim_prefix: str
    fim_suffix: str
    fim_middle: str
    stops: tuple[str, ...]  # end-of-generation strings of the family
    sentinels: tuple[str, ...]  # special strings that must never appear in a completion
    repo_name: str = ""  # repo-level form markers ("" when the family has none)
    file_sep: str = ""
    other_specials: tuple[str, ...] = ()  # further texts the family's tokenizers read as one special token

    @cached_property
    def specials(self) -> tuple[str, ...]:
        """Every text of the family's special tokens that repository text must not carry in."""
        texts = {*self.stops, *self.sentinels, *self.other_specials, self.fim_prefix, self.fim_suffix,
                 self.fim_middle, self.repo_name, self.file_sep}
        return tuple(sorted((t for t in texts if len(t) > 1), key=lambda t: (-len(t), t)))

    @cached_property
    def _special_text(self) -> re.Pattern | None:
        return re.compile("|".join(map(re.escape, self.specials))) if self.specials else None

    @cached_property
    def _broken_special(self) -> re.Pattern | None:
        broken = [t[0] + SPECIAL_BREAK + t[1:] for t in self.specials]
        return re.compile("|".join(map(re.escape, broken))) if broken else None

    def plain(self, text: str) -> str:
        """`text` as content: each special token's text in it broken by SPECIAL_BREAK after its
        first character (idempotent: the broken form holds no special text)."""
        pattern = self._special_text
        if pattern is None or pattern.search(text) is None:
            return text
        return pattern.sub(lambda m: m[0][0] + SPECIAL_BREAK + m[0][1:], text)

    def restored(self, completion: str) -> str:
        """`completion` with the broken forms `plain` wrote turned back into the texts they were."""
        pattern = self._broken_special
        if pattern is None or SPECIAL_BREAK not in completion:
            return completion
        return pattern.sub(lambda m: m[0].replace(SPECIAL_BREAK, "", 1), completion)

    @property
    def supports_fim(self) -> bool:
        return bool(self.fim_prefix)

    @property
    def supports_repo_form(self) -> bool:
        return bool(self.file_sep)

    def infill(self, prefix: str, suffix: str) -> str:
        """The fill-in-the-middle prompt for code between `prefix` and `suffix`."""
        prefix, suffix = self.plain(prefix), self.plain(suffix)
        if not self.supports_fim:
            return prefix
        if self.family == "codellama":
            # Code Llama: "<PRE> {prefix} <SUF>{suffix} <MID>" — a space after <PRE> and before <MID>.
            return f"{self.fim_prefix} {prefix} {self.fim_suffix}{suffix} {self.fim_middle}"
        return f"{self.fim_prefix}{prefix}{self.fim_suffix}{suffix}{self.fim_middle}"

    def repo_files(self, repo: str, files: list[tuple[str, str]]) -> str:
        """Repo-level preamble: each (path, code) as its own file section (Qwen / StarCoder 2)."""
        if not self.supports_repo_form:
            return ""
        sections = "".join(self.file_section(path, code) for path, code in files)
        return f"{self.repo_name}{self.plain(one_line(repo))}\n{sections}"

    def file_section(self, path: str, code: str) -> str:
        """One file of the repo-level form: its path, then its code."""
        return f"{self.file_sep}{self.plain(one_line(path))}\n{self.plain(code)}\n" if self.supports_repo_form else ""

    def current_file(self, path: str) -> str:
        return f"{self.file_sep}{self.plain(one_line(path))}\n" if self.supports_repo_form else ""

    def instruction(self, question: str) -> str:
        """`question` as the family's instruction turn, the model's answer to follow (memory
        strategies ask the model to navigate or reflect). Families without an instruction form
        get the question and an "Answer:" line that a base model continues."""
        question = self.plain(question)
        if self.family == "qwen":
            return (f"<|im_start|>system\nYou are a careful assistant for a code completion engine. "
                    f"Answer briefly.<|im_end|>\n<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n")
        if self.family == "codellama":
            return f"[INST] {question} [/INST] "  # Code Llama Instruct's turn; a base model reads it as text
        return f"{question}\nAnswer: "


CODELLAMA = Template(
    family="codellama", fim_prefix="<PRE>", fim_suffix="<SUF>", fim_middle="<MID>",
    stops=("<EOT>", "</s>"), sentinels=("<PRE>", "<SUF>", "<MID>", "<EOT>", "</s>"),
    other_specials=("<s>", "<unk>", "<STEP>"),
)
QWEN = Template(
    family="qwen", fim_prefix="<|fim_prefix|>", fim_suffix="<|fim_suffix|>", fim_middle="<|fim_middle|>",
    stops=("<|endoftext|>", "<|fim_pad|>", "<|file_sep|>", "<|repo_name|>", "<|im_end|>"),
    sentinels=("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|fim_pad|>", "<|endoftext|>",
               "<|file_sep|>", "<|repo_name|>", "<|im_start|>", "<|im_end|>"),
    repo_name="<|repo_name|>", file_sep="<|file_sep|>",
    # Qwen2.5's other added tokens (the GGUF's own list is checked against these in the tests).
    other_specials=("</s>", "<|object_ref_start|>", "<|object_ref_end|>", "<|box_start|>", "<|box_end|>",
                    "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
                    "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>"),
)
STARCODER = Template(
    family="starcoder", fim_prefix="<fim_prefix>", fim_suffix="<fim_suffix>", fim_middle="<fim_middle>",
    stops=("<|endoftext|>", "<file_sep>", "<fim_pad>"),
    sentinels=("<fim_prefix>", "<fim_suffix>", "<fim_middle>", "<fim_pad>", "<|endoftext|>", "<file_sep>",
               "<repo_name>"),
    repo_name="<repo_name>", file_sep="<file_sep>",
    # StarCoder 2's other special tokens (its data's markers and the PII placeholders).
    other_specials=("<filename>", "<gh_stars>", "<issue_start>", "<issue_comment>", "<issue_closed>",
                    "<jupyter_start>", "<jupyter_text>", "<jupyter_code>", "<jupyter_output>",
                    "<jupyter_script>", "<empty_output>", "<code_to_intermediate>", "<intermediate_to_code>",
                    "<pr>", "<pr_status>", "<pr_is_merged>", "<pr_base>", "<pr_file>", "<pr_base_code>",
                    "<pr_diff>", "<pr_diff_hunk>", "<pr_comment>", "<pr_event_id>", "<pr_review>",
                    "<pr_review_state>", "<pr_review_comment>", "<pr_in_reply_to_review_id>",
                    "<pr_in_reply_to_comment_id>", "<pr_diff_hunk_comment_line>", "<NAME>", "<EMAIL>",
                    "<KEY>", "<PASSWORD>"),
)
PLAIN = Template(family="plain", fim_prefix="", fim_suffix="", fim_middle="", stops=(), sentinels=())

def template_for(*names: str) -> Template:
    """Pick the family from a model name, a file name or GGUF metadata (`general.name`, ...)."""
    text = " ".join(names).lower().replace("_", "-")
    if "codellama" in text or "code-llama" in text or "code llama" in text:
        return CODELLAMA
    if "qwen" in text and "coder" in text:
        return QWEN
    if "starcoder" in text:
        return STARCODER
    return PLAIN
