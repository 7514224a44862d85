"""Write docs/configuration.md, the configuration reference, from the settings' declarations
(repomem/config/sections.py, each field's `setting(...)`).

    python scripts/config_reference.py           # rewrite the file
    python scripts/config_reference.py --check   # exit 1 when the committed file is out of date
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from repomem.config import Config
from repomem.setting_reference import REFERENCE_PATH, configuration_reference

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only say whether the file is current")
    args = parser.parse_args()
    path = ROOT / REFERENCE_PATH
    text = configuration_reference(Config)
    if args.check:
        current = path.exists() and path.read_text(encoding="utf-8") == text
        print(f"{REFERENCE_PATH} is {'current' if current else 'out of date: run python scripts/config_reference.py'}")
        return 0 if current else 1
    path.write_text(text, encoding="utf-8")
    print(f"wrote {REFERENCE_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
