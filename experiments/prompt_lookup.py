"""Would drafting tokens from the prompt (prompt-lookup decoding) write answers sooner on this CPU,
and would the answers stay the same?

    repomem eval run --tasks corpora/devset/line.jsonl --tasks corpora/devset/api.jsonl \
        --repos corpora/devset/repositories --limit 30 --seed 5 --strategies fragrel --right-context \
        [--model qwen2.5-coder-0.5b] --generations /tmp/gen.jsonl --defer PROMPTS.jsonl
    python experiments/prompt_lookup.py --prompts PROMPTS.jsonl --gguf MODEL.gguf [--limit 120] \
        [--out eval/results/prompt-lookup/NAME.json]

Prompt-lookup decoding guesses the next k tokens by finding the last n tokens written earlier in
the prompt or the answer and copying what followed them there; the model then reads the token it
wrote and the k guesses in one batch, keeps the guesses up to the first one it would not have
written, and writes the token after them itself. A round writes 1 + (guesses kept) tokens for the
price of one batch of 1 + k tokens. Whether that pays depends on two measurements, both made here
with llama.cpp on this machine's cores:

1. the price of a batch of b tokens after a prompt, every token's logits kept (b = 1 is an ordinary
   step), median of 7;
2. how many guesses each round would keep on real completions: each deferred prompt answered greedily
   one token at a time (its first line, at most 64 tokens, as the editor asks), then the drafting
   replayed over those tokens for each variant (guesses k; the longest and shortest n tried) and
   priced with (1).

And whether the answers stay the same: a guess is kept where the batch's logits pick it, and a
batch's arithmetic is not a single step's (other kernels, other sums). So each answer is also read
back after its prompt as one batch and each position's pick compared with the token written one at
a time: a difference is an answer prompt lookup would change.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np

STOP_TEXTS = ("<|endoftext|>", "<|fim_pad|>", "<|file_sep|>", "<|repo_name|>", "<|im_end|>")
BATCH_SIZES = (1, 2, 3, 4, 5, 6, 8, 10, 12)
VARIANTS = [(k, longest, shortest) for k in (2, 3, 4, 6, 8) for longest, shortest in ((3, 1), (3, 2), (4, 2))]
MAX_ANSWER_TOKENS = 64
PROMPT_TOKENS = 3000  # the prompt's last tokens kept (the editor's prompts are 1,024, eval's 2,048)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=Path, required=True, help="prompts deferred by `eval run --defer`")
    parser.add_argument("--gguf", type=Path, required=True, help="the model file llama.cpp runs")
    parser.add_argument("--limit", type=int, default=120)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("eval/results/prompt-lookup/prompt-lookup.json"))
    args = parser.parse_args()
    from llama_cpp import Llama

    llama = Llama(model_path=str(args.gguf), n_ctx=4096, n_threads=args.threads, n_threads_batch=args.threads,
                  flash_attn=True, verbose=False)
    every_logit(llama)
    prompts = [json.loads(line) for line in args.prompts.read_text().splitlines()[: args.limit]]
    tokens_of = [llama.tokenize(p["prompt"].encode(), add_bos=False, special=True)[-PROMPT_TOKENS:] for p in prompts]
    costs = batch_costs(llama, tokens_of[0])
    print("ms a batch:", {b: round(ms, 1) for b, ms in costs.items()}, flush=True)
    stops = {llama.token_eos()} | {t for text in STOP_TEXTS
                                   for t in llama.tokenize(text.encode(), add_bos=False, special=True)}
    answers, changed = [], 0
    for prompt, tokens in zip(prompts, tokens_of):
        answer = greedy_line(llama, tokens, stops)
        picks = batch_picks(llama, tokens, answer)
        differs = next((i for i, (a, b) in enumerate(zip(answer, picks)) if a != b), None)
        changed += differs is not None
        answers.append({"task": prompt["task"], "answer": answer, "batch_differs_at": differs})
    rows = [simulate(answers, tokens_of, costs, *variant) for variant in VARIANTS]
    written = sum(len(a["answer"]) for a in answers)
    for row in rows:
        print(f"k={row['guesses']} n={row['longest_n']}..{row['shortest_n']}: {row['tokens_a_round']:.2f} tokens a "
              f"round, decoding {row['decode_ratio']:.2f}x the time")
    print(f"{len(answers)} answers, {written} tokens; read back as one batch, {changed} would change")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "model": args.gguf.name, "prompts": str(args.prompts), "answers": len(answers), "tokens": written,
        "median_answer_tokens": statistics.median(len(a["answer"]) for a in answers),
        "batch_ms": costs, "variants": rows, "answers_a_batch_would_change": changed,
        "changed_tasks": [a["task"] for a in answers if a["batch_differs_at"] is not None],
    }, indent=2) + "\n")
    print(f"written {args.out}")
    return 0


def every_logit(llama) -> None:
    """A batch of at most MAX_ANSWER_TOKENS tokens keeps every token's logits (llama.cpp's default
    keeps the last token's only); a prompt's batches keep the last one's, as before."""
    set_batch = llama._batch.set_batch

    def every_small(batch, n_past, logits_all):
        return set_batch(batch=batch, n_past=n_past, logits_all=logits_all or len(batch) <= MAX_ANSWER_TOKENS)

    llama._batch.set_batch = every_small


def batch_costs(llama, prompt: list[int]) -> dict[int, float]:
    """Milliseconds of one batch of b tokens after `prompt` (b in BATCH_SIZES), median of 7."""
    llama.reset()
    llama.eval(prompt)
    read = llama.n_tokens
    costs = {}
    for size in BATCH_SIZES:
        times = []
        for _ in range(7):
            llama.n_tokens = read
            started = time.perf_counter()
            llama.eval(prompt[100 : 100 + size])
            times.append((time.perf_counter() - started) * 1000)
        costs[size] = statistics.median(times)
    return costs


def greedy_line(llama, prompt: list[int], stops: set[int]) -> list[int]:
    """The greedy answer's tokens up to the end of its first line with text, one step at a time."""
    llama.reset()
    llama.eval(prompt)
    answer: list[int] = []
    text = b""
    while len(answer) < MAX_ANSWER_TOKENS:
        token = int(np.argmax(last_logits(llama)))
        if token in stops:
            break
        answer.append(token)
        text += llama.detokenize([token])
        if b"\n" in text.lstrip(b"\n"):
            break
        llama.eval([token])
    return answer


def batch_picks(llama, prompt: list[int], answer: list[int]) -> list[int]:
    """Each position's pick when the answer is read after `prompt` as one batch: the first is the
    prompt's own (the same step as `greedy_line`'s), the others from the batch's rows."""
    if len(answer) < 2:
        return list(answer)
    llama.reset()
    llama.eval(prompt)
    llama.eval(answer[:-1])
    vocabulary = llama.n_vocab()
    rows = len(answer) - 1
    logits = np.ctypeslib.as_array(llama._ctx.get_logits(), shape=(rows * vocabulary,)).reshape(rows, vocabulary)
    return [answer[0], *(int(pick) for pick in np.argmax(logits, axis=1))]


def last_logits(llama) -> np.ndarray:
    """The last batch's last token's logits."""
    return np.ctypeslib.as_array(llama._ctx.get_logits_ith(-1), shape=(llama.n_vocab(),)).copy()


def simulate(answers: list[dict], prompts: list[list[int]], costs: dict[int, float], guesses: int, longest: int,
             shortest: int) -> dict:
    """The rounds prompt lookup would take over the recorded answers, and their price."""
    sizes = sorted(costs)

    def price(size: int) -> float:
        return float(np.interp(size, sizes, [costs[s] for s in sizes]))

    plain = drafted = 0.0
    rounds = written = 0
    for record, prompt in zip(answers, prompts):
        answer = record["answer"]
        plain += price(1) * len(answer)
        written += len(answer)
        at = 0
        while at < len(answer):
            guess = draft(prompt + answer[:at], guesses, longest, shortest)
            kept = 0
            while kept < len(guess) and at + kept < len(answer) and guess[kept] == answer[at + kept]:
                kept += 1
            drafted += price(1 + len(guess))
            rounds += 1
            at += kept + 1
    return {"guesses": guesses, "longest_n": longest, "shortest_n": shortest, "rounds": rounds,
            "tokens_a_round": written / max(rounds, 1), "decode_ratio": drafted / max(plain, 1e-9)}


def draft(context: list[int], guesses: int, longest: int, shortest: int) -> list[int]:
    """The `guesses` tokens that followed the latest earlier occurrence of the context's last n
    tokens, n from `longest` down to `shortest`; none where no such n-gram occurred."""
    for n in range(longest, shortest - 1, -1):
        if len(context) <= n:
            continue
        tail = context[-n:]
        for start in range(len(context) - n - 1, -1, -1):
            if context[start : start + n] == tail:
                return context[start + n : start + n + guesses]
    return []


if __name__ == "__main__":
    raise SystemExit(main())
