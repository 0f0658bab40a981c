"""Per (prompt, repeat): longspec (plain steps on) over longspec_rounds_only and both over vanilla static; geometric means."""
import json, math, statistics, sys
d = json.load(open(sys.argv[1]))
by = {}
for r in d['runs']:
    by.setdefault((r['length'], r['kind'], r['prompt'], r['repeat']), {})[r['method']] = r
g = lambda xs: math.exp(statistics.mean(map(math.log, xs)))
for length, kind in sorted({k[:2] for k in by}):
    on_off, on_van, off_van = [], [], []
    for key, m in by.items():
        if key[:2] != (length, kind) or len(m) < 3: continue
        a, b, v = (m[x]['decode_tokens_per_s'] for x in ('longspec', 'longspec_rounds_only', 'vanilla_static'))
        on_off.append(a / b); on_van.append(a / v); off_van.append(b / v)
    print(f"{length} {kind}: {len(on_off)} pairs; plain steps on / rounds only {g(on_off):.3f} ({min(on_off):.2f}-{max(on_off):.2f}); "
          f"on / vanilla static {g(on_van):.3f} ({min(on_van):.2f}-{max(on_van):.2f}); rounds only / vanilla static {g(off_van):.3f} ({min(off_van):.2f}-{max(off_van):.2f})")
