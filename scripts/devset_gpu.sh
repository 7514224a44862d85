#!/usr/bin/env bash
# The held-out protocol on the whole dev set, on a GPU machine (eval/README.md "On a GPU machine"):
# one evaluation process per (strategy, split), each with its own llama.cpp server (CUDA build,
# every layer on the GPU), so the machine's cores build prompts while the GPU decodes. An H100
# with 16 cores ran the five strategies below on 1,200 tasks in about 10 minutes.
#
#   bash scripts/devset_gpu.sh MODEL.gguf OUT_DIR [PROMPT_TOKENS=2048] [ORDER=score] [STRATEGIES]
#
# Writes OUT_DIR/{line,api}-STRATEGY.jsonl (records; rerunning resumes them), gen-*.jsonl (each
# process's generation store), *.log, and report.md with its plots.
set -euo pipefail
model=$1
out=$2
tokens=${3:-2048}
order=${4:-score}
strategies=${5:-vanilla,fragrel,fragrel-paper,repocoder,repocoder+fragrel}
tasks=${TASKS:-corpora/devset}
mkdir -p "$out"
# Build or update every repository's index once, before the processes start: started side by side,
# each would build it and save over the others.
repomem eval run --tasks "$tasks/line.jsonl" --repos "$tasks/repositories" --retrieval-only --limit 3 \
    --strategies vanilla --results "$out/.index-warmup.jsonl" > "$out/index-warmup.log" 2>&1
pids=()
for strategy in ${strategies//,/ }; do
    for split in line api; do
        name="$split-$strategy"
        repomem eval run --tasks "$tasks/$split.jsonl" --repos "$tasks/repositories" --results "$out/$name.jsonl" \
            --strategies "$strategy" --order "$order" --prompt-tokens "$tokens" \
            --generations "$out/gen-$name.jsonl" --workers 3 --model "$model" --gpu-layers -1 --threads 2 \
            > "$out/$name.log" 2>&1 &
        pids+=($!)
    done
done
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=$((failed + 1)); done
[ "$failed" = 0 ] || echo "$failed evaluation process(es) failed: see $out/*.log" >&2
repomem eval report "$out"/line-*.jsonl "$out"/api-*.jsonl --out "$out" \
    --title "Dev set, $tokens-token prompts, block order $order, $(basename "$model") on a GPU"
exit "$failed"
