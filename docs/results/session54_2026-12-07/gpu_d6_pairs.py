"""The sixth depth on an H100 (fifty-fourth session), paired prompt by prompt.

    python docs/results/session54_2026-12-07/gpu_d6_pairs.py

1. The draft alone, 6 deep (tau_h100_d6_8prompts: the first 8 prompts per kind and length of the GPU's record),
   against the forty-fourth session's record run of the shipped 5-deep tree on the same prompts (digests checked).
2. End to end with the default chain: decode_bench's longspec (5 deep) against longspec_tree_4-16-16-16-16-16 in
   the same run, per prompt (median over repeats), geometric mean of the speed ratio over the distinct prompts."""
import gzip, json, math, statistics
from pathlib import Path

HERE = Path(__file__).parent
RECORD = HERE.parent / "session44_2026-12-06" / "tau_gpu24_h100_tree_rerank_2k_8k.json.gz"
key = lambda r: (r["length"], r["kind"], r["index"])
record = {key(r): r for r in json.load(gzip.open(RECORD))["runs"]}
six = {key(r): r for r in json.load(gzip.open(HERE / "tau_h100_d6_8prompts.json.gz"))["runs"]}
assert all(record[k]["prompt_digest"] == six[k]["prompt_digest"] for k in six), "prompts differ"


def row(label, keys):
    d = [six[k]["tau"] - record[k]["tau"] for k in keys]
    print(f"| {label} ({len(keys)}) | {statistics.mean(record[k]['tau'] for k in keys):.2f} | "
          f"{statistics.mean(six[k]['tau'] for k in keys):.2f} | {statistics.mean(d):+.3f} ± "
          f"{statistics.stdev(d) / len(d) ** 0.5:.3f} ({sum(x > 0 for x in d)} / {sum(x < 0 for x in d)}) |")


print("| H100 bf16, the draft alone | 5 deep (44th record) | 6 deep | paired (better / worse) |\n|---|---|---|---|")
for kind in ("code", "prose", "chat"):
    row(kind, [k for k in six if k[1] == kind])
for length in (2048, 4096, 8000):
    row(str(length), [k for k in six if k[0] == length])
row("all", list(six))

SIX = "longspec_tree_4-16-16-16-16-16"
ratios = {}
for name in ("decode_bench_h100_d6.json", "decode_bench_h100_d6_6prompts.json"):
    speeds = {}
    for r in json.load(open(HERE / name))["runs"]:
        speeds.setdefault((r["length"], r["kind"], r["prompt_digest"], r["method"]), []).append(r["decode_tokens_per_s"])
    for (length, kind, digest, method), v in speeds.items():
        if method == SIX:  # the first run's prompts come back in the second: its own pairs are kept
            ratios.setdefault((length, kind, digest), statistics.median(v) / statistics.median(
                speeds[(length, kind, digest, "longspec")]))
geo = lambda xs: math.exp(statistics.mean(map(math.log, xs)))
for cell in sorted({(l, k) for l, k, _ in ratios}):
    v = [r for (l, k, _), r in ratios.items() if (l, k) == cell]
    print(f"end to end, 6 deep / default, {cell[0]} {cell[1]}: {geo(v):.3f} ({len(v)} prompts)")
print(f"end to end, all {len(ratios)} prompts: {geo(list(ratios.values())):.3f}, "
      f"6 deep faster on {sum(r > 1 for r in ratios.values())}")
