#!/usr/bin/env bash
# What a GPU machine without network needs to run the dev set (eval/README.md "On a GPU machine",
# BACKEND=hf), packed on a connected machine into pieces small enough for a size-limited channel:
#
#   [EMBEDDED_MODEL=qwen2.5-coder-1.5b] bash scripts/offline_bundle.sh OUT_DIR [PART_BYTES=63000000]
#
# OUT_DIR/bundle.tgz: site/ (the wheels the image lacks, unpacked for Python 3.12 x86-64:
# tree-sitter, tree-sitter-language-pack with its Python and JavaScript grammars only, pygls,
# lsprotocol, cattrs, rapidfuzz, gguf, deflate, msgspec) and corpora/devset (built here when missing);
# OUT_DIR/model.part00, 01, ...: the embedded GGUF (EMBEDDED_MODEL, default the 0.5B; the 1.5B is 18
# parts) cut in PART_BYTES pieces; OUT_DIR/model.sha256.
# On the other side: `tar xzf bundle.tgz -C W`, `cat model.part* > M.gguf`, `sha256sum -c`, then
# `PYTHONPATH=W/site python3 -m pip install --no-deps --no-build-isolation --target W/rm .` from
# the checkout and run from another folder (the checkout's own repomem/ would shadow the install).
set -euo pipefail
out=$1
part_bytes=${2:-63000000}
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out/wheels"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$out/wheels" \
    'tree-sitter==0.26.1' 'tree-sitter-language-pack==0.13.0' 'tree-sitter-c-sharp==0.23.5' \
    'tree-sitter-embedded-template==0.25.0' 'tree-sitter-yaml==0.7.2' 'pygls==2.1.1' \
    'lsprotocol==2025.0.0' 'cattrs==26.2.1' 'rapidfuzz==3.14.6' 'gguf==0.19.0' \
    'deflate==0.9.0' 'msgspec==0.23.0'
rm -rf "$out/site" && mkdir -p "$out/site"
for wheel in "$out"/wheels/*.whl; do python3 -m zipfile -e "$wheel" "$out/site"; done
# The dev set's repositories are Python: the other grammars (170 MB unpacked) stay behind.
find "$out/site/tree_sitter_language_pack/bindings" -name '*.so' \
    ! -name 'python.*' ! -name 'javascript.*' ! -name 'typescript.*' ! -name 'tsx.*' -delete
[ -f "$root/corpora/devset/line.jsonl" ] || (cd "$root" && repomem eval build --out corpora/devset)
tar czf "$out/bundle.tgz" -C "$out" site -C "$root" corpora/devset
repomem model pull "${EMBEDDED_MODEL:-qwen2.5-coder-0.5b}" > /dev/null
model=$(repomem model path "${EMBEDDED_MODEL:-qwen2.5-coder-0.5b}")
split -b "$part_bytes" -d -a 2 "$model" "$out/model.part"
(cd "$(dirname "$model")" && sha256sum "$(basename "$model")") > "$out/model.sha256"
ls -l "$out"/bundle.tgz "$out"/model.part*
