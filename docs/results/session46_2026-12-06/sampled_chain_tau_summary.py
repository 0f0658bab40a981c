"""Paired summary of sampled_chain_tau.py's JSONL: python sampled_chain_tau_summary.py sampled_chain_tau_cpu.jsonl"""
import json, statistics as st, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def summary(rs, label):
    d = [r["chain_32"] - r["no_chain"] for r in rs]
    se = st.stdev(d) / len(d) ** 0.5 if len(d) > 1 else float("nan")
    print(f"{label}: n={len(d)} no chain {st.mean(r['no_chain'] for r in rs):.3f} chain {st.mean(r['chain_32'] for r in rs):.3f} "
          f"paired {st.mean(d):+.3f} ± {se:.3f} ({sum(x > 0 for x in d)} / {sum(x < 0 for x in d)}) "
          f"rounds kept the chain's path {sum(r['chain_32_lookup_commits'] for r in rs)}")
summary(rows, "all")
for k in sorted({r["kind"] for r in rows}):
    summary([r for r in rows if r["kind"] == k], k)
