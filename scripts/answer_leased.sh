#!/usr/bin/env bash
# Answer deferred prompts (`eval run --defer`) on a lent GPU machine without network, in calls of
# limited length that each carry a few files and get back only what lands in $OUT
# (eval/README.md, "Generate elsewhere, in one short lease"). Run from the checkout's root there.
#
#   bash scripts/answer_leased.sh part model.partNN      # one call per part (scripts/offline_bundle.sh)
#   bash scripts/answer_leased.sh answer REQUESTS...     # the last call (carrying bundle.tgz and
#                                                        # model.sha256 if not sent before)
#
# The work folder (WORK, default /tmp/repomem-lease) outlives a call while the machine stays
# warm: the parts gather there; the first `answer` joins them into the model (named MODEL_NAME:
# the generation store is keyed by that name), checks it against model.sha256, unpacks
# bundle.tgz's wheels and installs this checkout beside them (run from WORK: the checkout's own
# repomem/ would shadow the install). Without a bundle it uses the Python it finds (a machine
# that has repomem's dependencies). REQUESTS are .jsonl files, .jsonl.xz, or .tar.xz archives of
# them; their prompts are answered into WORK/answers.jsonl by scripts/answer_requests.py, which
# skips what is already there, so a call cut short is resumed by the next. The answers are copied
# to $OUT every COPY_EVERY_S seconds and at the end, so a call killed at its limit still returns
# what it answered. Append them to the run's generation store and run the same `eval run` again.
#
# Settings (environment): WORK, MODEL_NAME (qwen2.5-coder-0.5b-instruct-q4_k_m.gguf), BATCH (192
# prompts per forward pass), LIMIT (s after which no batch starts; 0: none), COPY_EVERY_S (15),
# OUT (the machine's return folder; default WORK/out).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${WORK:-/tmp/repomem-lease}
model_name=${MODEL_NAME:-qwen2.5-coder-0.5b-instruct-q4_k_m.gguf}
out=${OUT:-$work/out}
mkdir -p "$work/parts" "$out"

usage() { echo "usage: $0 part FILE... | answer REQUESTS..." >&2; exit 2; }
[ $# -ge 2 ] || usage
command=$1; shift

if [ "$command" = part ]; then
    for part in "$@"; do
        [ -f "$part" ] || { echo "no such file: $part" >&2; exit 2; }
        cp "$part" "$work/parts/$(basename "$part")"
    done
    ls -l "$work/parts"
    exit 0
fi
[ "$command" = answer ] || usage
for requests in "$@"; do
    [ -f "$requests" ] || { echo "no such file: $requests" >&2; exit 2; }
done

model="$work/$model_name"
if [ ! -f "$model" ]; then
    [ -f "$root/model.sha256" ] && cp "$root/model.sha256" "$work/"
    compgen -G "$work/parts/model.part*" > /dev/null || { echo "no model parts in $work/parts: send them with 'part'" >&2; exit 2; }
    cat "$work"/parts/model.part* > "$model.partial"
    if [ -f "$work/model.sha256" ]; then
        expected=$(cut -d' ' -f1 < "$work/model.sha256")
        actual=$(sha256sum "$model.partial" | cut -d' ' -f1)
        if [ "$expected" != "$actual" ]; then
            rm -f "$model.partial"
            echo "the joined model's sha256 is $actual, not $expected: a part is missing or damaged" >&2
            exit 1
        fi
    else
        echo "warning: no model.sha256: the joined model is not checked" >&2
    fi
    mv "$model.partial" "$model"
    rm -f "$work"/parts/model.part*  # joined and checked: the disk need not hold the model twice
fi

# What Python finds: the bundle's wheels and this checkout installed beside them, if a bundle came.
if [ -f "$root/bundle.tgz" ] && [ ! -d "$work/site" ]; then
    tar xzf "$root/bundle.tgz" -C "$work" site
fi
if [ -d "$work/site" ]; then
    if [ ! -d "$work/rm/repomem" ]; then
        (cd "$work" && PYTHONPATH="$work/site" python3 -m pip install -q --no-deps --no-build-isolation \
            --target "$work/rm" "$root")
    fi
    export PYTHONPATH="$work/rm:$work/site"
fi

# Every request of every file, once, in one file (answer_requests.py shuffles by task itself).
requests="$work/requests.jsonl"
: > "$requests.partial"
for given in "$@"; do
    case "$given" in
        *.tar.xz) tar xJf "$given" -O --wildcards '*.jsonl' >> "$requests.partial" ;;
        *.xz) xz -dc "$given" >> "$requests.partial" ;;
        *) cat "$given" >> "$requests.partial" ;;
    esac
done
sort -u "$requests.partial" > "$requests" && rm "$requests.partial"
echo "$(wc -l < "$requests") requests; $( [ -f "$work/answers.jsonl" ] && wc -l < "$work/answers.jsonl" || echo 0) answered before"

answers="$work/answers.jsonl"
(cd "$work" && exec python3 "$root/scripts/answer_requests.py" "$requests" --out "$answers" \
    --hf "$model" --batch "${BATCH:-192}" --time-limit "${LIMIT:-0}") &
answering=$!
trap 'kill "$answering" 2>/dev/null || true; [ -f "$answers" ] && cp "$answers" "$out/answers.jsonl"' EXIT
ticks=0
while kill -0 "$answering" 2>/dev/null; do
    sleep 1
    ticks=$((ticks + 1))
    if [ "$ticks" -ge "${COPY_EVERY_S:-15}" ] && [ -f "$answers" ]; then
        ticks=0
        cp "$answers" "$out/answers.jsonl.copy" && mv "$out/answers.jsonl.copy" "$out/answers.jsonl"
    fi
done
wait "$answering"
