"""Build a draft card's measurements.json from the benchmark JSONs that measured it, never by hand.

    python benchmarks/card_measurements.py --tau TAU_CURVE_JSON --decode DECODE_BENCH_JSON \
        --out model_cards/longspec-smollm2-135m-instruct/measurements.json \
        --draft model_cards/longspec-smollm2-135m-instruct [--note TEXT ...]

Why: the card (hf_longspec.publishing.card.render_card) shows whatever measurements.json says, so
that file must be a faithful copy of measured rows. It takes
- from `benchmarks/tau_curve.py`: held-out tau per (kind, length), the mean over its prompts;
- from `benchmarks/decode_bench.py`: per (kind, length), vanilla static's and LongSpec's median decode
  tokens/s, LongSpec's median speedup over vanilla static in the same run, and its median tau;
and writes the hand-written summary format of hf_longspec.publishing.measurements, with the
environment read from the JSONs' machine records and one note per source naming its command line.
With `--draft` the sources must have measured that folder's weights (the digest they record,
hf_longspec.publishing.weights_digest), and the environment names them.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from hf_longspec.publishing.measurements import DRAFT_WEIGHTS
from hf_longspec.publishing.weights_digest import folder_weights_digest


def _machines(result: dict) -> list[dict]:
    """Every machine record of a source: one, or one per run that a joined source (tau_curve.py --join) holds."""
    machine = result.get("machine") or {}
    return (machine or [{}]) if isinstance(machine, list) else [machine]


def _machine(result: dict) -> dict:
    return _machines(result)[0]


def _provenance(name: str, result: dict) -> str:
    """`name: `command` (hf-longspec commit C)`, once per run that measured the source."""
    return f"{name}: " + "; ".join(f"`{machine.get('command_line', '?')}` (hf-longspec commit "
                                   f"{str(machine.get('git_commit', '?'))[:7]})" for machine in _machines(result))


def decoder_name(options: dict) -> str:
    """The card's name for a greedy LongSpec decoder, from a run's tree_widths, rerank_leaves and lookup_tokens."""
    widths = options.get("tree_widths")
    method = f"LongSpec tree {'-'.join(map(str, widths))}" if widths else "LongSpec"
    method += ", leaves re-ranked" if options.get("rerank_leaves") else ""
    lookup = options.get("lookup_tokens")
    return method + (f" + {lookup}-token lookup chain (greedy)" if lookup else " (greedy)")


def tau_runs(result: dict) -> list[dict]:
    """One run per (kind, length) row of a tau_curve.json."""
    settings = result.get("settings") or {}
    method = decoder_name(settings)
    return [{"task": row["kind"], "prompt_tokens": row["length"], "new_tokens": settings.get("new_tokens"),
             "method": method, "tau": round(row["tau_mean"], 2)} for row in result["rows"]]


def depth_note(result: dict) -> str | None:
    """Acceptance per depth, as EAGLE's and SpecForge's cards give it: per drafted depth k, the share
    of rounds whose accepted path reached k, the mean over the tau rows (each row pools its prompts)."""
    reaches = [row["depth"]["reach"] for row in result["rows"] if (row.get("depth") or {}).get("reach")]
    if not reaches:
        return None
    depths = min(len(r) for r in reaches)
    means = [sum(r[k] for r in reaches) / len(reaches) for k in range(depths)]
    shares = ", ".join(f"depth {k + 1} {share:.0%}" for k, share in enumerate(means))
    return (f"Acceptance per depth (share of rounds whose accepted path reaches the depth, mean over the "
            f"{len(reaches)} held-out tau rows): {shares}.")


def decode_runs(result: dict) -> list[dict]:
    """Per (kind, length) row of a decode_bench.json: the vanilla static run and LongSpec's run."""
    new_tokens = (result.get("settings") or {}).get("new_tokens")
    # the decoder the calls ran, as their stats record it (older runs record none: then plain "LongSpec")
    stats = next((r["stats"] for r in result.get("runs", []) if r.get("method") == "longspec" and r.get("stats")), {})
    method = decoder_name(stats) + ", end to end"
    runs = []
    for row in result["rows"]:
        base = {"task": row["kind"], "prompt_tokens": row["length"], "new_tokens": new_tokens}
        runs.append({**base, "method": "vanilla static (compiled)",
                     "tokens_per_second": round(row["vanilla_static"]["median"], 1)})
        longspec = row["longspec"]
        runs.append({**base, "method": method,
                     "tokens_per_second": round(longspec["median"], 1), "tau": round(row["tau_median"], 2),
                     "speedup": round(longspec["speedup_vs_static_median"], 2)})
    return runs


def environment(*results: dict) -> dict:
    """Device, dtype and versions from the first machine record; the dates of all sources."""
    machine = _machine(results[0])
    dtypes = {(r.get("settings") or {}).get("dtype") for r in results} - {None}
    return {"device": machine.get("device_name"), "dtype": dtypes.pop() if len(dtypes) == 1 else "bfloat16",
            "torch": machine.get("torch"), "transformers": machine.get("transformers"),
            "date": ", ".join(sorted({str(m.get("date_utc", ""))[:10] for r in results for m in _machines(r)} - {""}))}


def measured_weights(sources: dict[str, dict], weights_digest: str | None) -> str | None:
    """The draft weights the sources measured (publishing.weights_digest), all one and equal to
    `weights_digest` when that is given; sources from before digests were recorded name none."""
    named = {name: (result.get("draft") or {}).get("weights_digest") for name, result in sources.items()}
    recorded = {digest for digest in named.values() if digest}
    expected = {weights_digest} if weights_digest else set()
    if len(recorded | expected) > 1:
        measured = ", ".join(f"{name}: {digest or 'not recorded'}" for name, digest in named.items())
        raise ValueError(f"the measurements are of other draft weights than the card's ({measured}"
                         + (f"; the card's draft: {weights_digest}" if weights_digest else "") + "): "
                         "measure the draft being published, all sources with the same weights")
    return (recorded | expected).pop() if recorded | expected else None


def build(tau: dict | None, decode: dict | None, notes: list[str], weights_digest: str | None = None) -> dict:
    """measurements.json for a card; `weights_digest` (the card's draft, publishing.weights_digest) refuses
    sources that recorded other weights and is stated in the environment."""
    sources = [r for r in (tau, decode) if r is not None]
    if not sources:
        raise ValueError("give --tau, --decode or both: a card's measurements must come from measurements")
    digest = measured_weights({name: r for name, r in (("--tau", tau), ("--decode", decode)) if r is not None},
                              weights_digest)
    runs = (tau_runs(tau) if tau else []) + (decode_runs(decode) if decode else [])
    provenance = [_provenance(name, r) for name, r in (("held-out tau", tau), ("end to end", decode)) if r is not None]
    depths = [depth_note(tau)] if tau and depth_note(tau) else []
    place = environment(*sources)
    if digest:
        place[DRAFT_WEIGHTS] = digest
    return {"environment": place, "runs": runs, "notes": [*provenance, *depths, *notes]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tau", help="a benchmarks/tau_curve.py JSON")
    parser.add_argument("--decode", help="a benchmarks/decode_bench.py JSON")
    parser.add_argument("--out", required=True)
    parser.add_argument("--note", action="append", default=[], help="a note for the card (repeatable)")
    parser.add_argument("--draft", help="the draft folder the card is for: sources that measured other weights are refused")
    args = parser.parse_args(argv)
    load = lambda path: json.loads(Path(path).read_text()) if path else None  # noqa: E731
    digest = folder_weights_digest(args.draft) if args.draft else None
    Path(args.out).write_text(json.dumps(build(load(args.tau), load(args.decode), args.note, digest), indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
