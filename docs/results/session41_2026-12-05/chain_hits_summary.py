"""python docs/results/session41_2026-12-05/chain_hits_summary.py RUN.json ...: geometric means per kind of hits3 / hits2 and of each over vanilla static, pairing the calls of one prompt and repeat in one run."""
import json, math, sys
rows = []
for f in sys.argv[1:]:
    rows += [dict(r, file=f) for r in json.load(open(f))]
def gm(xs): return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")
for kind in ("prose", "code"):
    pairs = {}
    for r in rows:
        if r["kind"] != kind: continue
        pairs.setdefault((r["file"], r.get("run"), r["prompt"], r["repeat"]), {})[r["variant"]] = r["decode_tokens_per_s"]
    ratio = [p["hits3"] / p["hits2"] for p in pairs.values()]
    v2 = [p["hits2"] / p["vanilla_static"] for p in pairs.values()]
    v3 = [p["hits3"] / p["vanilla_static"] for p in pairs.values()]
    print(f"{kind}: {len(ratio)} pairs; hits3 / hits2 {gm(ratio):.3f}x ({min(ratio):.2f}-{max(ratio):.2f}); "
          f"over vanilla static: hits2 {gm(v2):.3f}x, hits3 {gm(v3):.3f}x")
    print("   per pair hits3/hits2:", " ".join(f"{x:.2f}" for x in ratio))
