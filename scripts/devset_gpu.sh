#!/usr/bin/env bash
# The held-out protocol on the whole dev set, on a GPU machine (eval/README.md "On a GPU machine"):
# one evaluation process per (group of strategies, split), so the machine's cores build prompts
# while the GPU decodes. An H100 with 16 cores ran the five strategies below on 1,200 tasks in about
# 10 minutes with llama.cpp.
#
#   bash scripts/devset_gpu.sh MODEL.gguf OUT_DIR [PROMPT_TOKENS=2048] [ORDER=score] [STRATEGIES]
#
# STRATEGIES: comma-separated, each in its own process; ';' separates groups that share one process
# (e.g. "vanilla,repocoder;fragrel,repocoder+fragrel": RepoCoder's first round is then the
# single-round strategy's generation, made once). Environment:
#   BACKEND=llama (default): each process runs its own llama.cpp server (CUDA build, every layer on
#     the GPU), 3 workers. BACKEND=hf: transformers in each process (`--hf`, bfloat16 on the GPU),
#     WORKERS workers (default 32) whose prompts are batched (completion.batch_size).
#   TIME_LIMIT_S: each evaluation process is interrupted after this many seconds (default: none);
#     records are written in task order, so TASK_ORDER=shuffled (tasks shuffled with a fixed seed
#     into OUT_DIR) keeps an interrupted run's finished tasks a sample of every repository.
#   TASKS: the dev set folder (default corpora/devset).
#   EVAL_OPTIONS: more options for every `eval run`, e.g. "--set completion.iterative_rounds=3".
#
# Writes OUT_DIR/{line,api}-GROUP.jsonl (records; rerunning resumes them), gen-*.jsonl (each
# process's generation store), *.log, and report.md with its plots.
set -euo pipefail
model=$1
out=$2
tokens=${3:-2048}
order=${4:-score}
strategies=${5:-vanilla,fragrel,fragrel-paper,repocoder,repocoder+fragrel}
tasks=${TASKS:-corpora/devset}
backend=${BACKEND:-llama}
mkdir -p "$out"
if [ "${TASK_ORDER:-}" = shuffled ]; then
    for split in line api; do
        python - "$tasks/$split.jsonl" "$out/tasks-$split.jsonl" <<'PY'
import random, sys
lines = open(sys.argv[1], encoding="utf-8").read().splitlines()
random.Random(20231).shuffle(lines)
open(sys.argv[2], "w", encoding="utf-8").write("\n".join(lines) + "\n")
PY
    done
    task_file() { echo "$out/tasks-$1.jsonl"; }
else
    task_file() { echo "$tasks/$1.jsonl"; }
fi
# Build or update every repository's index once, before the processes start: started side by side,
# each would build it and save over the others.
repomem eval run --tasks "$tasks/line.jsonl" --repos "$tasks/repositories" --retrieval-only --limit 3 \
    --strategies vanilla --results "$out/.index-warmup.jsonl" > "$out/index-warmup.log" 2>&1
if [ "$backend" = hf ]; then
    # Convert the GGUF once (transformers dequantizes it; the checkpoint is cached), not in every process.
    python -c "import sys; from repomem.backends.transformers_hf import TransformersBackend as T; \
b = T.open(sys.argv[1]); sys.exit(getattr(b, 'message', None))" "$model" > "$out/convert.log" 2>&1
    model_options=(--hf "$model" --workers "${WORKERS:-32}")
else
    model_options=(--model "$model" --gpu-layers -1 --threads 2 --workers 3)
fi
limit=()
[ -n "${TIME_LIMIT_S:-}" ] && limit=(timeout --signal=INT --kill-after=30 "$TIME_LIMIT_S")
pids=()
IFS=';' read -ra groups <<< "${strategies//,/;}"
[[ "$strategies" == *";"* ]] && IFS=';' read -ra groups <<< "$strategies"
for group in "${groups[@]}"; do
    for split in line api; do
        name="$split-${group//,/_}"
        "${limit[@]}" repomem eval run --tasks "$(task_file "$split")" --repos "$tasks/repositories" \
            --results "$out/$name.jsonl" --strategies "$group" --order "$order" --prompt-tokens "$tokens" \
            --generations "$out/gen-$name.jsonl" "${model_options[@]}" ${EVAL_OPTIONS:-} > "$out/$name.log" 2>&1 &
        pids+=($!)
    done
done
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=$((failed + 1)); done
[ "$failed" = 0 ] || echo "$failed evaluation process(es) failed or were interrupted: see $out/*.log" >&2
repomem eval report "$out"/line-*.jsonl "$out"/api-*.jsonl --out "$out" \
    --title "Dev set, $tokens-token prompts, block order $order, $(basename "$model") on a GPU ($backend)"
exit "$failed"
