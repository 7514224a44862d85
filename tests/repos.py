"""Small real repositories for the tests: written to a temporary folder, or the bundled example copied."""

from __future__ import annotations

import textwrap
from pathlib import Path

from repomem.config import Config
from repomem.service import RepoService

PACKAGE_FILES = {
    "pkg/__init__.py": """
        from .models import Model
        from .helpers import slugify as make_slug
    """,
    "pkg/models.py": """
        from .helpers import slugify


        class Base:
            def save(self):
                return self.validate()

            def validate(self):
                return True


        class Model(Base):
            table = "models"

            def __init__(self, name):
                self.name = name
                self.slug = slugify(name)

            def rename(self, name):
                self.name = name
                self.save()
                return self

            @classmethod
            def create(cls, name):
                obj = cls(name)
                cls.register(obj)
                return obj

            @classmethod
            def register(cls, obj):
                return obj
    """,
    "pkg/helpers.py": """
        import re


        def slugify(text):
            text = normalize(text)
            return re.sub(r"[^a-z0-9]+", "-", text).strip("-")


        def normalize(text):
            return text.strip().lower()


        def unused(value):
            return undefined_function(value)
    """,
    "pkg/sub/__init__.py": "",
    "pkg/sub/service.py": """
        import pkg.helpers
        from .. import models
        from ..models import Model as M
        from pkg import make_slug


        def run(name):
            model = M(name)
            models.Model.create(name)
            pkg.helpers.normalize(name)
            make_slug(name)
            return model.rename(name)
    """,
    "README.md": "# not code\n",
    "app.js": """
        function greet(name) {
          if (!name) {
            return "hello";
          }
          return "hello " + name;
        }
        module.exports = { greet };
    """,
}


def write_repo(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    (root / "repomem.toml").write_text("", encoding="utf-8")
    return root


EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "shop"


def copy_example(target: Path) -> Path:
    """The bundled example repository, copied without any index it may carry."""
    for path in EXAMPLE.rglob("*"):
        if path.is_file() and ".repomem" not in path.parts:
            destination = target / path.relative_to(EXAMPLE)
            destination.parent.mkdir(parents=True, exist_ok=True)
            destination.write_bytes(path.read_bytes())
    return target


def with_short_prompts(root: Path) -> Path:
    """`root` with a repository setting that keeps the example's prompts near 300 tokens (about
    1,000 at the default budget): prompt evaluation is ~10 ms a token on two cores, and tests that
    check what a completion does, not how much context fits, need no more."""
    (root / "repomem.toml").write_text("[completion]\nmax_prompt_tokens = 512\n", encoding="utf-8")
    return root


def synthetic_files(n_files: int, n_functions: int = 12, seed: int = 0) -> dict[str, str]:
    """A repository of interlinked modules, big enough for several windows per file."""
    import random

    rng = random.Random(seed)
    files: dict[str, str] = {}
    for number in range(n_files):
        folder = f"lib/part{number % 3}"
        lines = []
        if number > 0:
            other = rng.randrange(number)
            lines.append(f"from lib.part{other % 3}.mod{other} import func{other}_0, Thing{other}")
        lines.append("")
        lines.append(f"class Thing{number}:")
        lines.append("    def __init__(self, value):")
        lines.append("        self.value = value")
        lines.append("")
        lines.append("    def grow(self, amount):")
        lines.append("        self.value += amount")
        lines.append("        return self.shrink(amount // 2)")
        lines.append("")
        lines.append("    def shrink(self, amount):")
        lines.append("        return self.value - amount")
        for f in range(n_functions):
            lines.append("")
            lines.append("")
            lines.append(f"def func{number}_{f}(x, y=1):")
            lines.append(f"    total_{f} = x * {rng.randrange(1, 9)} + y")
            if f > 0:
                lines.append(f"    total_{f} += func{number}_{f - 1}(x)")
            if number > 0 and f % 4 == 0:
                lines.append(f"    total_{f} += func{other}_0(y)")
                lines.append(f"    Thing{other}(total_{f}).grow(x)")
            lines.append(f"    for item in range(total_{f} % 5):")
            lines.append(f"        total_{f} -= item")
            lines.append(f"    return total_{f}")
        files[f"{folder}/mod{number}.py"] = "\n".join(lines) + "\n"
    for part in range(3):
        files[f"lib/part{part}/__init__.py"] = ""
    files["lib/__init__.py"] = ""
    return files


def open_repository(root: Path, files: dict[str, str], config: Config | None = None) -> RepoService:
    """Write `files` as they are (no dedent, no repomem.toml) and open the indexed repository."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    service = RepoService.open(root, config or Config())
    assert isinstance(service, RepoService) and not hasattr(service.ensure_index(), "kind")
    return service


def call_edges(service: RepoService, path: str) -> list[tuple[int, str, int]]:
    """(call site line, defining file, definition line) of each call edge leaving `path` (0-based)."""
    index = service.index_for_measurement()
    file_id = index.file_id(path)
    assert file_id is not None
    syntax = index.syntax[file_id]
    rows = index.calls.get(file_id)
    found = set()
    for _, source_node, target_file, target_node, _ in ([] if rows is None else rows.tolist()):
        target_syntax, record = index.syntax[target_file], index.files[target_file]
        found.add((int(syntax.start_line[source_node]), record.path, int(target_syntax.start_line[target_node])))
    return sorted(found)
