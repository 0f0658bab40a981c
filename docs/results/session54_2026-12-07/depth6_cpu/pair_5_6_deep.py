"""Pair 5-deep and 6-deep draft-alone runs on the CPU record's 72 prompts (8 per kind and length).

    PYTHONPATH=src python docs/results/session54_2026-12-07/depth6_cpu/pair_5_6_deep.py

Prompt indices 0-3 were run by the fifty-third session (session53_2026-12-07/depth6/), 4-7 by the fifty-fourth
(this folder, tau_curve.py --first-prompt 4); code's 5-deep side is the forty-third session's record (same digests)."""
import gzip, json, statistics, sys
from pathlib import Path
from hf_longspec.evaluation import load_run_records
R53 = "docs/results/session53_2026-12-07/depth6/"
R43 = "docs/results/session43_2026-12-06/tau_cpu8_tree_rerank_2k_8k.json.gz"
R54 = "docs/results/session54_2026-12-07/depth6_cpu/tau_cpu_idx4to7_"
def runs(path):
    p = Path(path)
    if p.is_dir():
        p = p / ("tau_curve.json" if (p / "tau_curve.json").exists() else "runs.jsonl")
    if p.suffix == ".gz":
        return json.load(gzip.open(p))["runs"]
    return load_run_records(str(p)) if p.exists() else []
six = [*runs(R53 + "tau_cpu4_code_chat.json.gz"), *runs(R53 + "tau_cpu4_prose6.json.gz"),
       *runs(R54 + "code6.json.gz"), *runs(R54 + "chat6.json.gz"), *runs(R54 + "prose6.json.gz")]
five = [*[r for r in runs(R43) if r["kind"] == "code"], *runs(R53 + "tau_cpu4_prose5.json.gz"),
        *runs(R53 + "tau_cpu4_chat5.json.gz"), *runs(R54 + "chat5.json.gz"), *runs(R54 + "prose5.json.gz")]
key = lambda r: (r["length"], r["kind"], r["index"])
six_by, five_by = {key(r): r for r in six}, {key(r): r for r in five}
keys = sorted(set(six_by) & set(five_by))
assert all(six_by[k]["prompt_digest"] == five_by[k]["prompt_digest"] for k in keys), "prompt digests differ"
print(f"paired prompts: {len(keys)} (6 deep {len(six_by)}, 5 deep {len(five_by)})")
def se(xs): return statistics.stdev(xs) / len(xs) ** 0.5 if len(xs) > 1 else float("nan")
def row(label, ks):
    d = [six_by[k]["tau"] - five_by[k]["tau"] for k in ks]
    a = statistics.mean(five_by[k]["tau"] for k in ks); b = statistics.mean(six_by[k]["tau"] for k in ks)
    print(f"| {label} ({len(ks)}) | {a:.2f} | {b:.2f} | {statistics.mean(d):+.3f} ± {se(d):.3f} "
          f"({sum(x > 0 for x in d)} / {sum(x < 0 for x in d)}) |")
print("| CPU float32, the draft alone | 5 deep (shipped) | 6 deep | paired (better / worse) |\n|---|---|---|---|")
for kind in ("code", "prose", "chat"):
    row(kind + ", 2k-8k", [k for k in keys if k[1] == kind])
for length in (2048, 4096, 8000):
    row(f"{length}", [k for k in keys if k[0] == length])
row("all", keys)
for kind in ("code", "prose", "chat"):
    for name, by in (("5", five_by), ("6", six_by)):
        t2 = statistics.mean(by[k]["tau"] for k in keys if k[1] == kind and k[0] == 2048)
        t8 = statistics.mean(by[k]["tau"] for k in keys if k[1] == kind and k[0] == 8000)
        print(f"8k/2k {kind} {name} deep: {t8 / t2:.3f}x ({t2:.2f} -> {t8:.2f})")
def pooled_reach(by, depth):
    hist = {}
    for k in keys:
        for emitted, n in by[k]["histogram"].items():
            hist[int(emitted)] = hist.get(int(emitted), 0) + n
    rounds = sum(hist.values())
    return [round(sum(n for e, n in hist.items() if e - 1 >= d) / rounds, 3) for d in range(1, depth + 1)]
print("reach per depth (pooled rounds), 5 deep:", pooled_reach(five_by, 5))
print("reach per depth (pooled rounds), 6 deep:", pooled_reach(six_by, 6))
