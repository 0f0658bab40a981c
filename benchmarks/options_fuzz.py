"""Random generate() options against vanilla: does any combination change the tokens?

    PYTHONPATH=src python benchmarks/options_fuzz.py [--seconds 420] [--seed N]

The embedded SmolLM2 target and the shipped draft, float32 on the CPU. Each call picks a few options at random
(logits processors, eos lists, stop strings, the static cache, tree shapes, chains, node budgets, windows), a prompt
of real text (transformers' own source) of 50-1200 tokens, one prompt or a left-padded batch of two, greedy or
sampled with top_k=1 (which is greedy), and compares LongSpec's sequences with vanilla generate()'s on the same
options. Prints each call that differs (DIFF) or is refused (REFUSED, with the message), then a count. The
fifty-fourth session ran an earlier form of it twice (seeds 407684 and 884953, 95 draws): no call differed; the refusals were the
documented ones (plain steps asked beside host-walked processors, two chains when sampling).
"""

from __future__ import annotations

import argparse
import pathlib
import random
import time

import torch
import transformers

from hf_longspec.embedded import load_embedded_draft, load_embedded_target

OPTIONS = {
    "repetition_penalty": [1.2, 1.5], "no_repeat_ngram_size": [2, 3], "min_new_tokens": [10, 30],
    "bad_words_ids": [[[198]], [[79, 79]]], "sequence_bias": [{(198,): -5.0}, {(28,): 3.0}],
    "suppress_tokens": [[198, 28]], "eos_token_id": [[198, 2], [13]], "cache_implementation": ["static"],
    "stop_strings": [["\n\n"], ["):"]], "return_dict_in_generate": [True],
    "longspec_lookup_tokens": [0, 8, 32], "longspec_tree_widths": [[2, 2], [4, 8, 8], [1, 1, 1, 1], [3, 1, 3]],
    "longspec_plain_steps": [True, False], "longspec_rerank_leaves": [True, False], "longspec_lookup_chains": [2],
    "longspec_max_nodes": [8, 24], "longspec_cross_attention_window": [0, 64],
}


def random_inputs(rng, tokenizer, texts) -> dict:
    """One prompt, or a left-padded batch of two, of 50, 300 or 1200 tokens of real text."""
    length, text, start = rng.choice([50, 300, 1200]), rng.choice(texts), rng.randrange(0, 10000)
    if rng.random() < 0.25:
        batch = tokenizer([text[start:start + 4 * length], text[start + 3000:start + 3000 + 2 * length]],
                          return_tensors="pt", padding=True, padding_side="left")
        return {"input_ids": batch.input_ids[:, -length:], "attention_mask": batch.attention_mask[:, -length:]}
    return {"input_ids": tokenizer(text[start:start + 4 * length], return_tensors="pt").input_ids[:, :length]}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=420)
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(10**6)
    rng = random.Random(seed)
    print("seed", seed, flush=True)
    target, tokenizer = load_embedded_target(device="cpu", dtype=torch.float32)
    draft = load_embedded_draft(target)
    texts = [pathlib.Path(transformers.__file__).with_name(name).read_text()[:20000]
             for name in ("trainer.py", "modeling_utils.py")]
    calls = differing = refused = 0
    started = time.perf_counter()
    while time.perf_counter() - started < args.seconds:
        picked = {name: rng.choice(values) for name, values in OPTIONS.items() if rng.random() < 0.3}
        inputs = random_inputs(rng, tokenizer, texts)
        sampled = rng.random() < 0.3
        common = {"max_new_tokens": rng.choice([5, 40, 100]), "do_sample": sampled,
                  **({"top_k": 1, "temperature": rng.choice([0.7, 1.3])} if sampled else {}),
                  **({"tokenizer": tokenizer} if "stop_strings" in picked else {})}
        try:
            reference = target.generate(**inputs, **common,
                                        **{k: v for k, v in picked.items() if not k.startswith("longspec_")})
        except Exception:  # an option vanilla refuses for this prompt: nothing to compare
            continue
        calls += 1
        shape = f"{'sampled top_k=1' if sampled else 'greedy'}, {tuple(inputs['input_ids'].shape)}"
        try:
            out = target.generate(**inputs, **common, **picked, assistant_model=draft)
        except Exception as error:
            refused += 1
            print("REFUSED", shape, picked, f"{type(error).__name__}: {error}"[:300], flush=True)
            continue
        sequences = [getattr(o, "sequences", o) for o in (reference, out)]
        if not torch.equal(*sequences):
            differing += 1
            print("DIFF", shape, picked, flush=True)
    print(f"seed {seed}: {calls} calls, {differing} differed from vanilla, {refused} refused")


if __name__ == "__main__":
    main()
