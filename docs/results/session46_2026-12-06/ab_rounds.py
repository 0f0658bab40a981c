"""The same-run A/B of the sampled walk compiled whole (new) against each depth's tries compiled (old): per
prompt, LongSpec's rounds per second (rounds / (call - prefill)), tau, and tokens/s over vanilla static sampled.

    python ab_rounds.py ab_new_decode_bench.json.gz ab_old_decode_bench.json.gz
"""
import json, gzip, statistics as st, sys
def load(p):
    return json.load(gzip.open(p) if p.endswith(".gz") else open(p))
def cells(d):
    by = {}
    for r in d["runs"]:
        by[(r["length"], r["kind"], r["prompt"], r["repeat"], r["method"])] = r
    return by
new, old = cells(load(sys.argv[1])), cells(load(sys.argv[2]))
rows = []
for k, r in sorted(new.items()):
    if k[4] != "longspec_sampled": continue
    o = old[k]
    assert r["prompt_digest"] == o["prompt_digest"]
    rps = lambda x: x["stats"]["rounds"] / (x["wall_s"] - x["prefill_s"])
    vn, vo = new[k[:4] + ("vanilla_static_sampled",)], old[k[:4] + ("vanilla_static_sampled",)]
    rows.append(dict(cell=k[:3], rps_new=rps(r), rps_old=rps(o), tau_new=r["stats"]["tau"], tau_old=o["stats"]["tau"],
                     ratio_new=r["decode_tokens_per_s"]/vn["decode_tokens_per_s"], ratio_old=o["decode_tokens_per_s"]/vo["decode_tokens_per_s"],
                     v_new=vn["decode_tokens_per_s"], v_old=vo["decode_tokens_per_s"]))
for x in rows:
    print(x["cell"], "rounds/s %.0f -> %.0f (%.3fx)" % (x["rps_old"], x["rps_new"], x["rps_new"]/x["rps_old"]), "tau %.2f/%.2f" % (x["tau_old"], x["tau_new"]), "ratio %.2f/%.2f" % (x["ratio_old"], x["ratio_new"]), "vanilla %.0f/%.0f" % (x["v_old"], x["v_new"]))
g = [x["rps_new"]/x["rps_old"] for x in rows]
print("rounds/s new/old median %.3f range %.3f-%.3f n=%d" % (st.median(g), min(g), max(g), len(g)))
print("median ratio old %.2f new %.2f" % (st.median(x["ratio_old"] for x in rows), st.median(x["ratio_new"] for x in rows)))
print("rounds/s medians old %.0f new %.0f" % (st.median(x["rps_old"] for x in rows), st.median(x["rps_new"] for x in rows)))
print("vanilla medians old %.0f new %.0f" % (st.median(x["v_old"] for x in rows), st.median(x["v_new"] for x in rows)))
