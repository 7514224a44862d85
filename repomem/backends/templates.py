"""Prompt templates per model family: plain left-to-right, fill-in-the-middle, repo-level form.

The strings are exact (docs/design.md section 4): Code Llama's spaces matter, and vLLM's completions
endpoint has no `suffix` field, so the FIM string is rendered here for every backend.
"""

from __future__ import annotations

from dataclasses import dataclass


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

    @property
    def supports_fim(self) -> bool:
        return bool(self.fim_prefix)

    @property
    def supports_repo_form(self) -> bool:
        return bool(self.file_sep)

    def infill(self, prefix: str, suffix: str) -> str:
        """The fill-in-the-middle prompt for code between `prefix` and `suffix`."""
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
        return f"{self.repo_name}{repo}\n" + "".join(self.file_section(path, code) for path, code in files)

    def file_section(self, path: str, code: str) -> str:
        """One file of the repo-level form: its path, then its code."""
        return f"{self.file_sep}{path}\n{code}\n" if self.supports_repo_form else ""

    def current_file(self, path: str) -> str:
        return f"{self.file_sep}{path}\n" if self.supports_repo_form else ""

    def instruction(self, question: str) -> str:
        """`question` as the family's instruction turn, the model's answer to follow (memory
        strategies ask the model to navigate or reflect). Families without an instruction form
        get the question and an "Answer:" line that a base model continues."""
        if self.family == "qwen":
            return (f"<|im_start|>system\nYou are a careful assistant for a code completion engine. "
                    f"Answer briefly.<|im_end|>\n<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n")
        if self.family == "codellama":
            return f"[INST] {question} [/INST] "  # Code Llama Instruct's turn; a base model reads it as text
        return f"{question}\nAnswer: "


CODELLAMA = Template(
    family="codellama", fim_prefix="<PRE>", fim_suffix="<SUF>", fim_middle="<MID>",
    stops=("<EOT>", "</s>"), sentinels=("<PRE>", "<SUF>", "<MID>", "<EOT>", "</s>"),
)
QWEN = Template(
    family="qwen", fim_prefix="<|fim_prefix|>", fim_suffix="<|fim_suffix|>", fim_middle="<|fim_middle|>",
    stops=("<|endoftext|>", "<|fim_pad|>", "<|file_sep|>", "<|repo_name|>", "<|im_end|>"),
    sentinels=("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|fim_pad|>", "<|endoftext|>",
               "<|file_sep|>", "<|repo_name|>", "<|im_start|>", "<|im_end|>"),
    repo_name="<|repo_name|>", file_sep="<|file_sep|>",
)
STARCODER = Template(
    family="starcoder", fim_prefix="<fim_prefix>", fim_suffix="<fim_suffix>", fim_middle="<fim_middle>",
    stops=("<|endoftext|>", "<file_sep>", "<fim_pad>"),
    sentinels=("<fim_prefix>", "<fim_suffix>", "<fim_middle>", "<fim_pad>", "<|endoftext|>", "<file_sep>",
               "<repo_name>"),
    repo_name="<repo_name>", file_sep="<file_sep>",
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
