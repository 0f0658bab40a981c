"""benchmarks/tau_curve.py: chat prompts of exact length, acceptance per depth, a tiny end-to-end run."""

import importlib.util
import json
import math
import re
import statistics
from pathlib import Path

import pytest
import torch

from conftest import load_script


@pytest.fixture(scope="module")
def tau_curve():
    return load_script("benchmarks/tau_curve.py")


def test_text_file_prompts_end_at_their_own_points_and_share_each_ending(tau_curve, embedded, tmp_path, capsys):
    """--text-file NAME=PATH: prompt 0 ends at the file's end, the last one where the longest prompt starts
    at the file's start; with --align end every length of one index is the longest one's suffix. A file
    shorter than the longest length, a spec without NAME=, a missing file, a name given twice or one that is a
    corpus kind, and no kind at all are refused by name."""
    import argparse

    _, tokenizer = embedded
    essay = Path(tau_curve.__file__).read_text()  # real local text
    path = tmp_path / "essay.txt"
    path.write_text(essay)
    ids = tokenizer.encode(essay, add_special_tokens=False)
    prompts = tau_curve.build_prompts(tokenizer, [100, 300], ["code"], 3, text_files={"essay": str(path)})
    mine = {(p["length"], p["index"]): p["input_ids"] for p in prompts if p["kind"] == "essay"}
    assert sorted(mine) == [(length, index) for length in (100, 300) for index in range(3)]
    assert mine[300, 0] == ids[-300:] and mine[300, 2] == ids[:300]  # the file's end, and its start
    room = len(ids) - 300
    assert mine[300, 1] in (ids[room // 2 : room // 2 + 300], ids[room // 2 + 1 : room // 2 + 301])  # halfway
    for index in range(3):
        assert mine[100, index] == mine[300, index][-100:]
    assert [p["kind"] for p in prompts[:6]] == ["code"] * 3 + ["essay"] * 3  # by length, then the kinds' order
    started = tau_curve.build_prompts(tokenizer, [100, 300], [], 2, align="start", text_files={"essay": str(path)})
    assert [p["input_ids"] for p in started if p["index"] == 1] == [ids[:100], ids[:300]]
    with pytest.raises(ValueError, match=rf"essay=.* has {len(ids)} tokens; allowed: a file of at least the longest length"):
        tau_curve.build_prompts(tokenizer, [len(ids) + 1], [], 1, text_files={"essay": str(path)})
    for spec, match in (("essay", "allowed NAME=PATH"), (f"essay={tmp_path / 'nope.txt'}", "is not a file")):
        with pytest.raises(argparse.ArgumentTypeError, match=match):
            tau_curve.text_file(spec)
    for argv, match in (([f"essay={path}", "--text-file", f"essay={path}"], "names \\['essay'\\] twice"),
                        ([f"man={path}"], "names \\['man'\\] twice or as a corpus kind")):
        with pytest.raises(SystemExit):
            tau_curve.parse_args(["--out", "x", "--text-file", *argv])
        assert re.search(match, capsys.readouterr().err)
    with pytest.raises(SystemExit):
        tau_curve.parse_args(["--out", "x", "--kinds"])
    assert "no kind and no --text-file" in capsys.readouterr().err


@pytest.mark.parametrize("option, value, allowed", [
    ("--cross-attention-window", "-1", "an int >= 0 \\(0: every entry"),
    ("--lookup-tokens", "-2", "an int from 0 to 32"),
    ("--lookup-tokens", "33", "an int from 0 to 32"),
    ("--lookup-chains", "0", "an int from 1 to 2"),
    ("--lookup-chains", "3", "an int from 1 to 2"),
    ("--prompts", "0", "an int >= 1"),
    ("--new-tokens", "0", "an int >= 1"),
])
def test_bad_numbers_are_refused_by_the_parser_before_any_model_loads(tau_curve, capsys, option, value, allowed):
    with pytest.raises(SystemExit):
        tau_curve.parse_args(["--out", "x", option, value])
    assert re.search(f"{option} {value}: allowed: {allowed}", capsys.readouterr().err)


def test_depth_acceptance_from_tokens_per_round(tau_curve):
    # 4 rounds: 0, 2, 5 and 5 draft tokens accepted (the histogram counts the bonus token too)
    got = tau_curve.depth_acceptance({1: 1, 3: 1, 6: 2}, depth=5)
    assert got["reach"] == [0.75, 0.75, 0.5, 0.5, 0.5]
    assert got["accept"] == [0.75, 1.0, pytest.approx(2 / 3), 1.0, 1.0]


def test_chat_prompt_is_the_chat_template_around_an_eval_document(tau_curve, embedded):
    _, tokenizer = embedded
    for index in (0, 1):  # a code document, then a docs one
        description, head, document, tail = tau_curve.chat_parts(tokenizer, 200, index)
        ids = head + document + tail
        text = tokenizer.decode(ids)
        assert len(ids) == 200 and description.endswith(tau_curve.CHAT_SOURCES[index])
        assert text.startswith("<|im_start|>system") and text.endswith("<|im_end|>\n<|im_start|>assistant\n")
    with pytest.raises(ValueError, match="chat prompt needs more"):
        tau_curve.chat_parts(tokenizer, 8, 0)


def test_aligned_prompts_share_their_ending_and_keep_the_chat_template(tau_curve, embedded):
    """--align end (the default): each shorter prompt is the longest one's suffix, so every length
    continues the same text; a chat prompt loses the front of its document, not its template.
    --align start cuts each length from the stream's start, so the endings differ."""
    _, tokenizer = embedded
    prompts = tau_curve.build_prompts(tokenizer, [120, 300], ["code", "chat"], 2)
    assert [(p["length"], p["kind"], p["index"]) for p in prompts] == [
        (length, kind, index) for length in (120, 300) for kind in ("code", "chat") for index in (0, 1)]
    by_key = {(p["length"], p["kind"], p["index"]): p for p in prompts}
    for kind in ("code", "chat"):
        for index in (0, 1):
            short, long = by_key[120, kind, index]["input_ids"], by_key[300, kind, index]["input_ids"]
            assert len(short) == 120 and len(long) == 300 and "head" not in by_key[120, kind, index]
            if kind == "code":
                assert short == long[-120:]
            else:
                text = tokenizer.decode(short)
                assert text.startswith("<|im_start|>system") and text.endswith("<|im_start|>assistant\n")
                tail = len(tokenizer.encode("<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False))
                assert short[-tail - 40:] == long[-tail - 40:] and short[:20] == long[:20]
                assert short != long[-120:]  # the template's head was kept, not cut
    # --suffix-of 300: a run of 120 alone measures the 120-token suffixes the 120+300 run measured
    alone = tau_curve.build_prompts(tokenizer, [120], ["code", "chat"], 2, suffix_of=300)
    assert [p["input_ids"] for p in alone] == [p["input_ids"] for p in prompts if p["length"] == 120]
    assert tau_curve.build_prompts(tokenizer, [120], ["code"], 1)[0]["input_ids"] != by_key[120, "code", 0]["input_ids"]
    for bad in ({"suffix_of": 100}, {"suffix_of": 300, "align": "start"}):
        with pytest.raises(ValueError, match="allowed: align 'end' and a length at least the longest"):
            tau_curve.build_prompts(tokenizer, [120], ["code"], 1, **bad)
    with pytest.raises(SystemExit):
        tau_curve.parse_args(["--out", "x", "--lengths", "2048", "8000", "--suffix-of", "4096"])
    started = tau_curve.build_prompts(tokenizer, [120, 300], ["code"], 1, align="start")
    assert started[0]["input_ids"] == started[1]["input_ids"][:120]  # same start, different endings
    with pytest.raises(ValueError, match="code prompt: cannot cut a 300-token prompt to 400"):
        tau_curve.suffix_prompt(by_key[300, "code", 0], 400)
    with pytest.raises(ValueError, match="align must be 'end' or 'start'"):
        tau_curve.build_prompts(tokenizer, [120], ["code"], 1, align="middle")


def test_tau_curve_quick_on_the_embedded_target(tau_curve, embedded, tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")  # PyTorch math on the CPU, as a plain run
    monkeypatch.setattr(tau_curve, "load_embedded_target", lambda **kwargs: embedded)  # the session's SmolLM2
    tau_curve.main(["--out", str(tmp_path), "--lengths", "96", "--kinds", "code", "chat", "--prompts", "1",
                    "--new-tokens", "12", "--check-exact", "--lookup-tokens", "0", "--cross-attention-window", "0"])
    # prose prompts: test_bench's workloads test; the draft's tree alone, so that certainty_strata.py (below) may
    # read its rounds; a window of 0 (every entry; the shipped draft's own is 2048) is asked per call, not set on the
    # draft's config, which refuses 0
    result = json.loads((tmp_path / "tau_curve.json").read_text())
    assert [(r["length"], r["kind"]) for r in result["rows"]] == [(96, "code"), (96, "chat")]
    assert result["settings"]["tree_widths"] == [4, 16, 16, 16, 16] and result["settings"]["dtype"] == "float32"
    assert result["settings"]["cross_attention_window"] == 0
    assert result["draft"]["cross_attention_window"] is None  # what the calls read: every entry (joins compare it)
    from hf_longspec.embedded import embedded_draft_dir
    from hf_longspec.publishing.weights_digest import folder_weights_digest
    assert result["draft"]["weights_digest"] == folder_weights_digest(embedded_draft_dir())  # what it measured
    for run in result["runs"]:
        assert run["tau"] >= 1.0 and run["identical"] is True  # float32: the same tokens as greedy
        assert len(run["depth"]["reach"]) == 5 and run["new_tokens"] <= 12
        assert (run["tree_widths"], run["lookup_tokens"]) == ([4, 16, 16, 16, 16], 0)  # its own tree, not the CPU's
        assert 0 < run["target_top1_prob"] <= 1 and run["target_entropy"] >= 0  # from the vanilla pass
        assert len(run["target_top1_probs"]) == run["new_tokens"]  # one certainty per step, in order
        assert run["target_top1_prob"] == pytest.approx(statistics.fmean(run["target_top1_probs"]), abs=1e-4)
        assert sum(run["round_lengths"]) == run["new_tokens"] - 1 and len(run["round_lengths"]) == run["rounds"]
    assert all(row["exact"] == "1/1" for row in result["rows"]) and result["goals"]["chat_tau"] >= 1.0
    assert "| 96 | chat | 1 |" in (tmp_path / "tau_curve.md").read_text()
    # each run names its prompt, and lookup_tau.py rebuilds the same ones from the settings
    lookup = load_script("benchmarks/lookup_tau.py")
    prompts = lookup.replay_prompts(embedded[1], result["settings"])
    for run in result["runs"]:
        assert run["prompt_digest"] == tau_curve.prompt_digest(prompts[(run["length"], run["kind"], run["index"])])
    assert "rebuilt unverified" not in lookup.compare(result["runs"], prompts, depth=5)
    if importlib.util.find_spec("matplotlib") is not None:
        assert (tmp_path / "tau_curve.png").stat().st_size > 0
    # each prompt's record was also written as it was measured: a run cut by a time limit keeps them
    lines = (tmp_path / "runs.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == result["runs"]
    # certainty_strata.py reads such a run (here one length against itself: the same rates)
    strata = load_script("benchmarks/certainty_strata.py")
    report = strata.main([str(tmp_path / "runs.jsonl"), "--out", str(tmp_path / "strata"), "--short", "96",
                          "--long", "96", "--edges", "0.5"])
    pooled = report["strata"]["all"]
    assert pooled["pairs"] == 2 and pooled["short_counts"] == pooled["long_counts"]
    assert pooled["ratio_raw"] == 1.0 and pooled["ratio_standardized"] == pytest.approx(1.0)


def test_a_repeated_prompt_counts_once_and_flatness_has_a_paired_interval(tau_curve):
    """Two indices that cut the same prompt (prose: little eval text) are one measurement; the mean
    goal is over code, prose and chat only; each kind's 8000 / 2048 ratio gets a bootstrap interval."""
    def run(kind, index, length, tau, digest=None):
        return {"kind": kind, "index": index, "length": length, "tau": tau, "histogram": {"1": 1},
                "prompt_digest": digest or f"{kind}{index}@{length}"}

    records = [run("prose", 0, 2048, 4.0), run("prose", 0, 8000, 2.0),
               run("prose", 1, 2048, 4.0, "same"), run("prose", 1, 8000, 3.0, "same8"),
               run("prose", 2, 2048, 4.0, "same"), run("prose", 2, 8000, 3.0, "same8"),  # index 1 again
               run("code", 0, 2048, 3.0), run("code", 0, 8000, 3.0),
               run("docs", 0, 2048, 9.0), run("docs", 0, 8000, 9.0)]
    rows = tau_curve.summarize(records, depth=5)
    prose = {row["length"]: row for row in rows if row["kind"] == "prose"}
    assert prose[2048]["n"] == 2 and prose[2048]["repeated"] == 1 and prose[8000]["tau_mean"] == 2.5
    goals = tau_curve.goals(rows, records)
    assert goals["mean_over_kinds"] == ["prose", "code"] and goals["mean_tau_2k_8k"] == (4.0 + 2.5 + 3.0 + 3.0) / 4
    flat = goals["flatness_8000_over_2048"]
    assert flat["prose"]["pairs"] == 2 and flat["prose"]["ratio"] == 2.5 / 4.0
    assert flat["prose"]["low"] == 0.5 and flat["prose"]["high"] == 0.75  # the two pairs' own ratios bound it
    assert flat["code"] == {"ratio": 1.0, "low": 1.0, "high": 1.0, "pairs": 1}
    assert goals == tau_curve.goals(rows, records)  # seeded: the same file, the same interval
    assert "| 2048 | prose | 2 (+1 repeated) |" in tau_curve.markdown(rows, 5)



def test_certainty_strata_reads_each_round_as_hits_then_a_miss_unless_the_path_was_full():
    """Rounds of 3, 1, 6 and 2 tokens on a 5-deep tree: hits at depths 1-2 then a miss at 3; a miss at
    depth 1; five hits and no miss (the target's token after a full path); the last round is left out.
    From the first divergence from plain generate on, no position counts; a run without the records, or
    one that committed the prompt-lookup chain, is refused by name."""
    strata = load_script("benchmarks/certainty_strata.py")
    probs = [round(0.05 * i, 2) for i in range(13)]
    record = {"kind": "prose", "index": 0, "length": 2048, "round_lengths": [3, 1, 6, 2], "target_top1_probs": probs,
              "identical": True}
    got = strata.position_outcomes(record, depth=5)
    assert got == [(0.05, 1, True), (0.1, 2, True), (0.15, 3, False), (0.2, 1, False),
                   (0.25, 1, True), (0.3, 2, True), (0.35, 3, True), (0.4, 4, True), (0.45, 5, True)]
    assert strata.position_outcomes({**record, "identical": False, "first_divergence": 6}, depth=5) == got[:5]
    with pytest.raises(ValueError, match="no round_lengths or target_top1_probs; allowed: tau_curve.py runs with --check-exact"):
        strata.position_outcomes({"kind": "prose", "index": 0, "length": 2048, "round_lengths": [2]}, depth=5)
    with pytest.raises(ValueError, match="committed the prompt-lookup chain.*allowed: --lookup-tokens 0"):
        strata.position_outcomes({**record, "lookup_commits": 1}, depth=5)


def test_certainty_strata_standardizes_the_long_prompts_to_the_short_ones_certainty():
    """A draft that hits 90% of sure positions and 30% of unsure ones at both lengths, while the target is
    sure at 80% of the short prompts' positions and 40% of the long ones': the raw rate falls, the
    standardized one does not (the fall is the target's); a draft whose rates halve at 8k falls in both."""
    strata = load_script("benchmarks/certainty_strata.py")

    def record(index, length, sure, unsure, sure_hits, unsure_hits):
        # one-token rounds are misses at depth 1, two-token rounds a hit then (the last round aside) a miss
        probs, rounds = [0.5], []
        for count, hits, p in ((sure, sure_hits, 0.95), (unsure, unsure_hits, 0.2)):
            for i in range(count):
                rounds.append(2 if i < hits else 1)
                probs += [p] * rounds[-1]
        return {"kind": "prose", "index": index, "length": length, "round_lengths": rounds + [1],
                "target_top1_probs": probs + [0.5], "identical": True}

    same_draft = [record(i, 2048, 80, 20, 72, 6) for i in range(3)] + [record(i, 8000, 40, 60, 36, 18) for i in range(3)]
    s = strata.strata(same_draft, 2048, 8000, depth=5, edges=[0.5])["prose"]
    assert s["pairs"] == 3 and s["ratio_raw"] < 0.85
    assert s["ratio_standardized"] == pytest.approx(1.0) and s["interval_standardized"][0] == pytest.approx(1.0)
    repeated = [{**r, "index": 3, "prompt_digest": "same"} for r in same_draft[:1] + same_draft[3:4]]
    twice = [{**r, "index": 4} for r in repeated]  # index 4 cut the very prompts of index 3: counted once
    assert strata.strata(same_draft + repeated + twice, 2048, 8000, depth=5, edges=[0.5])["prose"]["pairs"] == 4
    worse_draft = same_draft[:3] + [record(i, 8000, 80, 20, 36, 3) for i in range(3)]
    s = strata.strata(worse_draft, 2048, 8000, depth=5, edges=[0.5])["prose"]
    assert s["ratio_raw"] < 0.7 and s["ratio_standardized"] < 0.7 and s["interval_standardized"][1] < 0.9


def test_target_confidence_is_the_mean_probability_and_entropy_of_its_steps(tau_curve):
    """Two generate steps of one row: a flat step (p = 1/4 each, entropy log 4) and a nearly certain one."""
    flat, sure = torch.zeros(1, 4), torch.tensor([[40.0, 0.0, 0.0, 0.0]])
    result = tau_curve.target_confidence((flat, sure))
    assert result["target_top1_prob"] == pytest.approx((0.25 + 1.0) / 2)
    assert result["target_entropy"] == pytest.approx(math.log(4) / 2, abs=1e-6)

def test_a_kind_without_enough_local_text_is_skipped_and_recorded(tau_curve, embedded, monkeypatch):
    """On a machine with too little eval text of one kind, the other kinds still get their prompts and
    the reason is kept (a GPU session lost two whole evaluations to one missing kind)."""
    _, tokenizer = embedded
    real = tau_curve.build_workloads

    def scarce(tokenizer, lengths, kinds, prompts, seed=0, first_index=0):
        if kinds == ["prose"]:
            raise ValueError("Only 12 tokens of local prose text found; asked for 96")
        return real(tokenizer, lengths, kinds, prompts, seed=seed, first_index=first_index)

    monkeypatch.setattr(tau_curve, "build_workloads", scarce)
    skipped = {}
    prompts = tau_curve.build_prompts(tokenizer, [96], ["code", "prose", "chat"], 1, skipped=skipped)
    assert [p["kind"] for p in prompts] == ["code", "chat"]
    assert skipped == {"prose": "Only 12 tokens of local prose text found; asked for 96"}
    with pytest.raises(ValueError, match="local prose text"):  # without a dict to record it: an error
        tau_curve.build_prompts(tokenizer, [96], ["code", "prose"], 1)


def test_compare_tau_pairs_the_same_prompts_of_two_drafts(tmp_path, capsys):
    """benchmarks/compare_tau.py: means per kind and length, the long / short ratio, pooled depth
    reach and the paired better / worse counts, over the prompts both files hold; with tokens kept, the
    pairs apart by whether the two outputs are the same text."""
    compare = load_script("benchmarks/compare_tau.py")

    def write(name, taus):
        runs = [{"length": length, "kind": kind, "index": i, "tau": tau, "rounds": 10,
                 "depth": {"reach": [0.5] * 5, "accept": [0.5] * 5}}
                for (length, kind, i), tau in taus.items()]
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"runs": runs}))
        return f"{name}={path}"

    old = {(2048, "code", 0): 4.0, (2048, "code", 1): 2.0, (8000, "code", 0): 3.0, (8000, "prose", 0): 1.0}
    new = {(2048, "code", 0): 5.0, (2048, "code", 1): 2.0, (8000, "code", 0): 2.0, (8000, "prose", 0): 3.0,
           (4096, "code", 0): 9.0}  # a prompt only one file has is left out
    assert compare.main([write("old", old), write("new", new)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("4 prompts: code, prose at 2048, 8000 tokens")
    assert "| code | 3.00 | 3.00 |" in out and "| prose | 1.00 | 3.00 |" in out
    assert "| 8000 / 2048, code | 1.00x | 0.57x |" in out and "| all | **2.50** | **3.00** |" in out
    assert "better on 2, worse on 1, equal on 1; mean paired difference +0.500" in out
    assert "| 8000 | 2.00 (3.00) | 3.00 (1.00) |" in out and "50 / 50 / 50 / 50 / 50%" in out
    assert compare.main([write("old", old), write("new", new), "--lengths", "2048"]) == 0
    assert "better on 1, worse on 0, equal on 1" in capsys.readouterr().out
    cut = tmp_path / "cut.jsonl"  # a cut run's runs.jsonl pairs as its JSON would
    cut.write_text("".join(json.dumps(run) + "\n" for run in json.loads((tmp_path / "new.json").read_text())["runs"]))
    assert compare.main([write("old", old), f"cut={cut}", "--lengths", "2048"]) == 0
    assert "better on 1, worse on 0, equal on 1" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="NAME=PATH"):
        compare.main([str(tmp_path / "old.json")])
    # with the tokens kept, the pairs are also split by whether the two outputs wrote the same text
    def with_tokens(name, taus, texts):
        path = write(name, taus).partition("=")[2]
        report = json.loads(Path(path).read_text())
        for run in report["runs"]:
            run["tokens"] = texts.get((run["length"], run["kind"], run["index"]), [1, 2, 3])
        Path(path).write_text(json.dumps(report))
        return f"{name}={path}"

    assert compare.main([with_tokens("old", old, {}), with_tokens("new", new, {(8000, "prose", 0): [1, 2, 4]})]) == 0
    out = capsys.readouterr().out
    assert "- 3 prompts wrote the same tokens in both: +0.000 ± 0.577 (better on 1, worse on 1)" in out
    assert "- 1 prompt wrote other text in both: +2.000" in out
    assert compare.main([with_tokens("old", old, {}), with_tokens("new", new, {})]) == 0
    assert "a pair measures two continuations" not in capsys.readouterr().out  # every pair wrote the same text
    # runs that named their prompts pair only on the same prompt; a file without digests still pairs
    def named(name, taus, digest):
        path = write(name, taus).partition("=")[2]
        report = json.loads(Path(path).read_text())
        for run in report["runs"]:
            run["prompt_digest"] = digest(run)
        Path(path).write_text(json.dumps(report))
        return f"{name}={path}"

    same = named("same", old, lambda run: f"{run['kind']}{run['length']}{run['index']}")
    other = named("other", old, lambda run: "x" if run["kind"] == "prose" else f"{run['kind']}{run['length']}{run['index']}")
    assert compare.main([same, write("plain", new)]) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit, match="the prose prompt 0 at 8000 tokens differs between same, other"):
        compare.main([same, other])


def test_lookup_tau_replays_prompt_lookup_on_a_greedy_output():
    """benchmarks/lookup_tau.py (the library's PromptLookup replayed): the chain copies what followed
    the latest earlier match of the longest recurring suffix; replaying it counts rounds as
    tau_curve.py does (prefill token free)."""
    lookup = load_script("benchmarks/lookup_tau.py")
    context = [1, 2, 3, 4, 9, 2, 3, 5, 6, 2, 3]
    assert lookup.lookup_chain(context, 2) == [5, 6]  # "2 3" recurs: the latest match, not the first
    assert lookup.lookup_chain(context + [4], 3) == [9, 2, 3]  # "2 3 4" beats "3 4" and "4"
    assert lookup.lookup_chain([7, 8], 3) == [] and lookup.lookup_chain([5], 3) == []
    # --ngram-sizes: the search tries the given suffix lengths only ("1 2" recurs, but with (1,) the
    # latest "2" wins)
    assert lookup.lookup_chain([5, 7, 1, 2, 8, 2, 6, 1, 2], 3) == [8, 2, 6]
    assert lookup.lookup_chain([5, 7, 1, 2, 8, 2, 6, 1, 2], 3, ngram_sizes=(1,)) == [6, 1, 2]
    assert lookup.lookup_chain([5, 7, 1, 2, 8, 2, 6, 1, 2], 3, ngram_sizes=(1, 2)) == [8, 2, 6]  # longest first
    for bad in [(), (0,), (2, 0), (-1,), (True,)]:
        with pytest.raises(ValueError, match="ngram_sizes must be one or more whole numbers >= 1"):
            lookup.lookup_chain([1, 2, 1, 2], 3, ngram_sizes=bad)
    prompt = [10, 11, 12, 13, 14, 15, 16, 17]
    # the target copies the prompt: after the prefill's 10, rounds accept 5 + 1 tokens each
    assert lookup.lookup_tau(prompt, [10, 11, 12, 13, 14, 15, 16, 17, 10, 11, 12, 13, 14], depth=5) == 12 / 2
    # nothing recurs: every round yields the target's own token only
    assert lookup.lookup_tau([1, 2, 3], [4, 5, 6, 7], depth=5) == 1.0
    # a run is replayed on its own prompt only: another prompt under its key is refused, a run without
    # a digest (recorded before the sixteenth session) is replayed and said to be unverified
    run = {"length": 8, "kind": "code", "index": 0, "tau": 2.0, "tokens": [10, 11, 12]}
    digest = lookup.prompt_digest(prompt)
    assert "unverified" not in lookup.compare([{**run, "prompt_digest": digest}], {(8, "code", 0): prompt}, 5)
    with pytest.raises(ValueError, match="code prompt 0 at 8 tokens rebuilt here is not the one"):
        lookup.compare([{**run, "prompt_digest": digest}], {(8, "code", 0): prompt[::-1]}, 5)
    assert "1 recorded no prompt digest" in lookup.compare([run], {(8, "code", 0): prompt}, 5)
    with pytest.raises(ValueError, match="no code prompt 0 at 8 tokens could be rebuilt here"):
        lookup.compare([run], {}, 5)


def test_lookup_tau_replays_a_second_chain_where_the_first_guesses_wrong():
    """lookup_tau.py --second-chain K (thirty-fourth session, not in the library): the second candidate is the
    continuation of the latest earlier match whose first token differs from the first chain's (the same suffix,
    else a shorter one), repeated with its own period; a round keeps the longer matching prefix."""
    lookup = load_script("benchmarks/lookup_tau.py")
    context = [1, 2, 3, 7, 8, 1, 2, 3, 9, 1, 2, 3]
    first = lookup.lookup_chain(context, 4)
    assert first == [9, 1, 2, 3]  # the latest "1 2 3"
    assert lookup.second_chain(context, first, 4) == [7, 8, 1, 2]  # the one before it, another next token
    assert lookup.second_chain(context, [7], 2) == [9, 1]  # the latest whose next token is not 7
    assert lookup.second_chain([4, 5, 6, 4, 5, 6, 4], [5], 3) == []  # every match continues with 5
    assert lookup.second_chain([5, 1, 6, 2, 1], [6], 3) == []  # "2 1" does not recur, and "1" goes on with 6
    assert lookup.second_chain([5, 1, 6, 2, 5, 1, 6, 3, 1], [6], 6) == []  # only 6 after "1"
    assert lookup.second_chain([1, 4, 2, 1, 6, 1], [6], 5) == [4, 2, 1, 6, 1]  # period 5: the context's end
    # the target follows the older continuation: the first chain misses at once (a round of its own token, then
    # "2 3 7" recurs and it takes 3 more), the second takes 4 tokens in the first round
    prompt = [1, 2, 3, 7, 8, 1, 2, 3, 9, 1, 2]
    output = [3, 7, 8, 1, 2, 5]
    assert lookup.lookup_tau(prompt, output, depth=4) == 5 / 2
    assert lookup.lookup_tau(prompt, output, depth=4, second=4) == 5 / 1
    assert "and a second chain of 4" in lookup.compare(
        [{"length": 11, "kind": "code", "index": 0, "tau": 2.0, "tokens": output}], {(11, "code", 0): prompt}, 4,
        second=4)


def test_lookup_tau_replays_each_set_of_ngram_sizes_it_is_given(tmp_path, monkeypatch, capsys):
    """lookup_tau.py --ngram-sizes (repeatable): one table per set, each named by the sizes as the search
    tries them (longest first); without the option, the library's."""
    lookup = load_script("benchmarks/lookup_tau.py")
    prompt = [10, 11, 12, 13, 14, 15, 16, 17]
    run = {"length": 8, "kind": "code", "index": 0, "tau": 2.0, "tokens": [10, 11, 12, 13, 14, 15]}
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"settings": {"lengths": [8], "kinds": ["code"], "prompts": 1}, "runs": [run]}))
    monkeypatch.setattr(lookup, "replay_prompts", lambda tokenizer, settings: {(8, "code", 0): prompt})
    monkeypatch.setattr("hf_longspec.embedded.load_tokenizer", lambda target, gguf_file=None: None)
    assert lookup.main([str(path), "--ngram-sizes", "1", "--ngram-sizes", "1", "3", "2"]) == 0
    out = capsys.readouterr().out
    assert "n-grams 1, 1 prompts" in out and "n-grams 3/2/1, 1 prompts" in out
    assert lookup.main([str(path)]) == 0
    assert "n-grams 3/2/1, 1 prompts" in capsys.readouterr().out


def test_lookup_tau_search_window_hides_the_prompts_older_matches(tmp_path, monkeypatch, capsys):
    """lookup_tau.py --search-window W: the search sees only the prompt's last W tokens. Here the output
    copies the prompt's opening, which lies outside a 4-token window: the whole prompt lets every round
    copy it, the window finds nothing to copy."""
    lookup = load_script("benchmarks/lookup_tau.py")
    prompt = [10, 11, 12, 13, 14, 15, 16, 17, 20, 21, 22, 23]
    output = [10, 11, 12, 13, 14, 15]
    run = {"length": 12, "kind": "prose", "index": 0, "tau": 1.5, "tokens": output}
    assert "| 12 | prose | 0 | 1.50 | 5.00 |" in lookup.compare([run], {(12, "prose", 0): prompt}, 5)
    assert "| 12 | prose | 0 | 1.50 | 1.00 |" in lookup.compare([run], {(12, "prose", 0): prompt}, 5, search_window=4)
    for bad in (0, -3, True, 2.5):
        with pytest.raises(ValueError, match="search_window=.*allowed: None"):
            lookup.compare([run], {(12, "prose", 0): prompt}, 5, search_window=bad)
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"settings": {"lengths": [12], "kinds": ["prose"], "prompts": 1}, "runs": [run]}))
    monkeypatch.setattr(lookup, "replay_prompts", lambda tokenizer, settings: {(12, "prose", 0): prompt})
    monkeypatch.setattr("hf_longspec.embedded.load_tokenizer", lambda target, gguf_file=None: None)
    assert lookup.main([str(path), "--search-window", "4", "--search-window", "100"]) == 0
    out = capsys.readouterr().out
    assert "searching the prompt's last 4 tokens" in out and "searching the prompt's last 100 tokens" in out
    with pytest.raises(SystemExit):
        lookup.main([str(path), "--search-window", "0"])
    assert "--search-window [0]: each must be >= 1" in capsys.readouterr().err


def test_lookup_tau_rebuilds_the_prompts_the_run_measured(tau_curve, embedded):
    """lookup_tau.py replays a stored output against its own prompt: a run recorded before --align
    existed (no "align" in its settings, e.g. the sixth session's) was start-aligned, a later one says
    which it was. Rebuilt end-aligned, the old runs' shorter prompts would end in other text."""
    _, tokenizer = embedded
    lookup = load_script("benchmarks/lookup_tau.py")
    settings = {"lengths": [1024, 2048], "kinds": ["code"], "prompts": 1, "seed": 0}
    start = {(p["length"], p["kind"], p["index"]): p["input_ids"]
             for p in tau_curve.build_prompts(tokenizer, [1024, 2048], ["code"], 1, 0, align="start")}
    end = {(p["length"], p["kind"], p["index"]): p["input_ids"]
           for p in tau_curve.build_prompts(tokenizer, [1024, 2048], ["code"], 1, 0, align="end")}
    assert start[(1024, "code", 0)] != end[(1024, "code", 0)]  # the two alignments differ here
    assert lookup.replay_prompts(tokenizer, settings) == start
    assert lookup.replay_prompts(tokenizer, {**settings, "align": "end"}) == end
    assert lookup.replay_prompts(tokenizer, {**settings, "align": "start"}) == start


@pytest.mark.parametrize("extra_layers", [[], [0]], ids=["one_layer", "two_layers"])
def test_context_probe_reads_as_the_draft_trains_and_restricts_exactly_what_it_says(extra_layers):
    """benchmarks/draft_context_probe.py: its unrestricted reading is the draft's training forward
    (also with a learned length temperature and the direct read of the newest entry), and `recent` keeps the anchors and the last R entries
    a query may read, nothing else."""
    from conftest import tiny_llama
    from hf_longspec import LongSpecDraftModel

    probe = load_script("benchmarks/draft_context_probe.py")
    mask = probe.cross_attention_mask(seq=12, queries=3, shift=2, recent=4, anchors=2)
    assert [row.nonzero().flatten().tolist() for row in mask] == [[0, 1, 4, 5, 6, 7], [0, 1, 5, 6, 7, 8],
                                                                   [0, 1, 6, 7, 8, 9]]
    target = tiny_llama(layers=2, initializer_range=0.2)
    # the direct read of the newest entry is for one-layer drafts only (configuration_longspec.py)
    options = {"extra_target_layer_indices": extra_layers} if extra_layers else {"target_entry_input": True}
    draft = LongSpecDraftModel.from_target(target, sliding_window=16, cross_attention_length_scale=32, **options)
    with torch.no_grad():
        for p in draft.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    ids = torch.randint(0, 96, (1, 100), generator=torch.Generator().manual_seed(0))
    probe.check_against_training_forward(draft, target, ids, shift=2)  # raises on a mismatch
    _, keys, values = probe.target_pass(target, ids, draft.target_layers)
    whole = probe.draft_logits(draft, ids, keys, values, 8, 2, None)
    assert torch.equal(probe.draft_logits(draft, ids, keys, values, 8, 2, 100), whole)
    assert not torch.allclose(probe.draft_logits(draft, ids, keys, values, 8, 2, 4), whole, atol=1e-4)


def test_context_probe_writes_each_prompt_as_it_is_probed(tmp_path, monkeypatch):
    """draft_context_probe.py's results.jsonl holds each prompt's result as soon as it is measured (a run cut
    by a time limit keeps them), the same records its final JSON holds; tiny random models, the real probe."""
    from conftest import tiny_llama
    from hf_longspec import LongSpecDraftModel

    probe = load_script("benchmarks/draft_context_probe.py")
    target = tiny_llama(layers=2, initializer_range=0.2)
    draft = LongSpecDraftModel.from_target(target, sliding_window=16)
    stream = torch.randint(0, 96, (2, 100), generator=torch.Generator().manual_seed(0)).tolist()
    stream.append(stream[1])  # index 2 cuts index 1's prompts again (a kind with little eval text): counted once
    prompts = [{"kind": "code", "index": i, "length": n, "input_ids": stream[i][-n:], "source": "random"}
               for n in (80, 100) for i in (0, 1, 2)]  # the check reads 64 queries of prompt 0
    monkeypatch.setattr(probe, "load_embedded_target", lambda dtype: (target, None))
    monkeypatch.setattr(probe, "load_draft_for", lambda target, name: (draft, "tiny"))
    monkeypatch.setattr(probe, "build_prompts", lambda *args, **kwargs: prompts)
    report = probe.main(["--out", str(tmp_path), "--kinds", "code", "--prompts", "3", "--lengths", "80", "100",
                         "--queries", "8", "--shifts", "1", "--recent", "16", "40"])
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    assert len(lines) == 3 and [json.loads(line) for line in lines] == report["results"]
    assert report["repeated_prompts"] == 1 and report["results"][1]["shift 1"] == report["results"][2]["shift 1"]
    assert set(report["results"][0]["shift 1"]) == {"80", "100", "100, recent 16", "100, recent 40"}
    # --summarize reads the jsonl, or the log lines a cut run printed, into the same paired summary
    log = tmp_path / "probe.log"
    log.write_text("Loading weights\n" + "".join(f"code-{r['index']}: {json.dumps(r['shift 1'])} (3 s)\n"
                                                  for r in report["results"][:2]))  # a log names no digests
    for source in (tmp_path / "results.jsonl", log):
        assert probe.main(["--out", str(tmp_path / "summary"), "--summarize", str(source)]) == report["paired"]
    first, second, _ = (r["shift 1"] for r in report["results"])
    cell = report["paired"]["code"]["top1"]
    assert cell["prompts"] == 2 and cell["mean"]["100"] == pytest.approx((first["100"]["top1"] + second["100"]["top1"]) / 2)
    assert cell["100 - 80"]["mean"] == pytest.approx(statistics.fmean(
        r["100"]["top1"] - r["80"]["top1"] for r in (first, second)))
    # a sweep's later window is compared with the one before it and with the whole long cache
    for before in ("100, recent 16", "100"):
        assert cell[f"100, recent 40 - {before}"]["mean"] == pytest.approx(statistics.fmean(
            r["100, recent 40"]["top1"] - r[before]["top1"] for r in (first, second)))


def test_feature_probe_adds_the_final_state_of_the_newest_readable_entry():
    """benchmarks/feature_probe.py: the draft it trains reads W h(i - shift), h the target's final normed
    state caught by a hook during the target's forward: zero W changes nothing, and with W set, the
    logits at i move with h at i - shift only."""
    from conftest import tiny_llama
    from hf_longspec import LongSpecDraftModel
    from hf_longspec.target_support import target_layer_kv

    probe = load_script("benchmarks/feature_probe.py")
    target = tiny_llama(layers=2, initializer_range=0.2)
    draft = LongSpecDraftModel.from_target(target, sliding_window=16)
    ids = torch.randint(0, 96, (1, 24), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        out = target(ids, use_cache=True)
        keys, values = target_layer_kv(out.past_key_values, draft.target_layer_index)
        plain = draft(ids, keys, values, noise_shift=2).logits
        hook = probe.read_final_state(draft, target)
        target(ids)  # the hook keeps this forward's final states
        states = draft.final_states.clone()
        torch.testing.assert_close(states, target.model(ids).last_hidden_state)  # what the LM head reads
        assert torch.equal(draft(ids, keys, values, noise_shift=2).logits, plain)
        draft.cross_attn.feature_proj.weight.normal_(0, 0.5, generator=torch.Generator().manual_seed(1))
        before = draft(ids, keys, values, noise_shift=2).logits
        draft.final_states = states.clone()
        draft.final_states[0, 10] += 1.0
        after = draft(ids, keys, values, noise_shift=2).logits
        hook.remove()
    moved = (after - before).abs().amax(-1)[0]
    assert moved[12] > 1e-3 and moved[:12].max() == 0 and moved[13:].max() == 0
    assert not torch.equal(before, plain)


@pytest.mark.parametrize("arm", ["second_block", "second_layer"])
def test_feature_probe_depth_arms_start_as_the_draft_and_read_the_target_again(arm):
    """benchmarks/feature_probe.py --arms second_block / second_layer: the added block's output projections
    start at zero, so the draft's logits are unchanged; set, the block's cross-attention honours the Flash
    Noisy Training shift (target K/V at j moves logits at i >= j + shift only) and, for second_layer, its
    self-attention reads the first layer's outputs within the window. Seeded: one seed, one block."""
    from conftest import tiny_llama
    from hf_longspec import LongSpecDraftModel
    from hf_longspec.target_support import target_layer_kv

    probe = load_script("benchmarks/feature_probe.py")
    target = tiny_llama(layers=2, initializer_range=0.2)
    draft = LongSpecDraftModel.from_target(target, sliding_window=16)
    ids = torch.randint(0, 96, (1, 40), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        keys, values = target_layer_kv(target(ids, use_cache=True).past_key_values, draft.target_layer_index)
        plain = draft(ids, keys, values, noise_shift=2).logits
        probe.change_draft(arm, draft, target, seed=3).remove()
        block = draft.second_block
        assert ("self_attn" in block) == (arm == "second_layer")
        assert torch.equal(draft(ids, keys, values, noise_shift=2).logits, plain)
        twin = LongSpecDraftModel.from_target(target, sliding_window=16)
        probe.change_draft(arm, twin, target, seed=3)
        assert all(torch.equal(a, b) for a, b in zip(block.state_dict().values(), twin.second_block.state_dict().values()))
        for name, parameter in block.named_parameters():
            if name.endswith(("o_proj.weight", "down_proj.weight")):
                parameter.normal_(0, 0.5, generator=torch.Generator().manual_seed(1))
        before = draft(ids, keys, values, noise_shift=2).logits
        assert not torch.equal(before, plain)
        # only the block reads the target a second time: zero the first layer's cross-attention
        draft.cross_attn.o_proj.weight.zero_()
        base = draft(ids, keys, values, noise_shift=2).logits
        moved_keys = keys.clone()
        moved_keys[:, :, 10] += 1.0
        after = draft(ids, moved_keys, values, noise_shift=2).logits
        # and the first layer's self-attention: the first layer is then per position, so another token
        # at 5 moves only position 5, unless the block's self-attention reads it (within the window)
        draft.self_attn.o_proj.weight.zero_()
        other = ids.clone()
        other[0, 5] = (ids[0, 5] + 1) % 96
        by_token = (draft(other, keys, values, noise_shift=2).logits - draft(ids, keys, values, noise_shift=2).logits)
    moved = (after - base).abs().amax(-1)[0]
    assert moved[:12].max() == 0 and moved[12] > 1e-4
    by_token = by_token.abs().amax(-1)[0]
    assert by_token[5] > 1e-4 and by_token[:5].max() == 0 and by_token[21:].max() == 0
    if arm == "second_layer":
        assert by_token[6:21].min() > 0
    else:
        assert by_token[6:].max() == 0


def test_feature_probe_scores_the_token_each_position_predicts_and_merges_seeds(tmp_path):
    """feature_probe.agreement pairs the draft's logits at j with the target's at j (both predict j + 1):
    a "draft" that returns the target's own logits agrees at 1.0, one shifted by a position does not;
    --merge joins two seeds' reports and refuses reports of other settings."""
    import json
    from types import SimpleNamespace

    from conftest import tiny_llama

    probe = load_script("benchmarks/feature_probe.py")
    target = tiny_llama(layers=2, initializer_range=0.2)

    class Echo(torch.nn.Module):  # the target's logits as the draft's, optionally one position late
        target_layer_index, target_layers = -1, (-1,)

        def __init__(self, late):
            super().__init__()
            self.late = late

        def forward(self, ids, keys, values, noise_shift):
            logits = target(ids).logits
            return SimpleNamespace(logits=torch.roll(logits, self.late, dims=1))

    ids = torch.randint(0, 96, (1, 80), generator=torch.Generator().manual_seed(2))
    prompts = [("prose", 80, ids)]
    exact = probe.agreement(target, Echo(0), prompts, scored=32)
    assert exact["pooled"]["1"] == {"top1": 1.0, "top4": 1.0} and exact["cells"]["prose@80"]["3"]["top1"] == 1.0
    assert probe.agreement(target, Echo(1), prompts, scored=32)["pooled"]["1"]["top1"] < 0.5

    def report(seed, lr=5e-4, init_draft="embedded"):
        run = {"arm": "plain", "seed": seed, "loss": [[1, 2.0]], **exact}
        settings = {key: 1 for key in ("steps", "seq_len", "batch_size", "warmup_steps", "max_tokens",
                                       "corpus_max_epochs", "eval_prompts", "scored_positions")}
        settings.update(lr=lr, corpus_mix="code=1", eval_kinds=["prose"], eval_lengths=[80], seeds=[seed],
                        init_draft=init_draft)
        path = tmp_path / f"seed{seed}_{lr}_{init_draft}.json"
        path.write_text(json.dumps({"machine": {"seed": seed}, "settings": settings, "start": exact, "runs": [run]}))
        return str(path)

    merged = probe.merged([report(0), report(1)])
    assert [run["seed"] for run in merged["runs"]] == [0, 1] and merged["settings"]["seeds"] == [0, 1]
    with pytest.raises(ValueError, match=r"measured something else.*\['lr'\]"):
        probe.merged([report(0), report(1, lr=1e-3)])
    with pytest.raises(ValueError, match=r"measured something else.*\['init_draft'\]"):
        probe.merged([report(0), report(1, init_draft="none")])


def test_feature_probe_pairs_each_arm_with_plain_prompt_by_prompt_over_shared_seeds():
    """benchmarks/feature_probe.py paired_against: per prompt the arm's tau less plain's, averaged over the
    seeds both ran, then mean, standard error, better / worse; a seed plain did not run is left out."""
    probe = load_script("benchmarks/feature_probe.py")

    def run(arm, seed, taus):
        return {"arm": arm, "seed": seed, "recipe": {"draft_overrides": {}}, "tau_per_prompt": taus}

    report = {"runs": [run("plain", 0, [2.0, 3.0, 1.0]), run("plain", 1, [2.0, 2.0, 2.0]),
                       run("plus4", 0, [2.5, 3.0, 0.0]), run("plus4", 1, [3.5, 2.0, 2.0]),
                       run("plus4", 2, [9.0, 9.0, 9.0]), run("plus15", 2, [5.0, 5.0, 5.0])]}
    (row,) = probe.paired_against(report)  # plus15 shares no seed with plain
    assert (row["arm"], row["seeds"], row["prompts"]) == ("plus4", [0, 1], 3)
    deltas = [1.0, 0.0, -0.5]  # prompt by prompt, the mean of seed 0's and seed 1's differences
    assert row["mean"] == pytest.approx(sum(deltas) / 3)
    assert row["stderr"] == pytest.approx(statistics.stdev(deltas) / math.sqrt(3))
    assert (row["better"], row["worse"]) == (1, 1)
    assert "| plus4 | plain | 0, 1 | +0.167 ± 0.441 | 1 / 1 |" in probe.paired_table(report)


def test_feature_probe_chain_length_stops_at_the_first_miss_and_reads_depth_d_at_its_own_position():
    """feature_probe.chain_lengths: depth d of the round rooted at j is read at j + d - 1, and a round ends
    at its first miss (a later hit counts for nothing); an echo of the target scores the full chain."""
    from types import SimpleNamespace

    from conftest import tiny_llama

    probe = load_script("benchmarks/feature_probe.py")
    T, F = True, False
    # rounds start at j = 0, 1, 2 (5 positions, depth 3): j=0 and j=1 miss depth 1 (their later hits count
    # for nothing); j=2 hits depth 1 at 2, depth 2 at 3, depth 3 at 4 -> 3. Read depth d at j (not j + d - 1),
    # or at j + d, or without stopping at a miss, and the mean differs.
    hits = [torch.tensor([F, F, T, T, T]), torch.tensor([T, T, F, T, T]), torch.tensor([T] * 5)]
    assert probe.chain_lengths(hits) == pytest.approx(1 + (0 + 0 + 3) / 3)
    assert probe.chain_lengths([torch.tensor([F] * 4)]) == 1.0

    target = tiny_llama(layers=2, initializer_range=0.2)

    class Echo(torch.nn.Module):  # the target's logits as the draft's at every lag, optionally one position late
        target_layer_index, target_layers = -1, (-1,)

        def __init__(self, late):
            super().__init__()
            self.late = late

        @torch.no_grad()
        def forward(self, ids, keys, values, noise_shift):
            return SimpleNamespace(logits=torch.roll(target(ids).logits, self.late, dims=1))

    ids = torch.randint(0, 96, (1, 80), generator=torch.Generator().manual_seed(2))
    scores = probe.agreements(target, {"exact": Echo(0), "late": Echo(1)}, [("code", 80, ids)], scored=32, chain_depth=4)
    assert scores["exact"]["pooled"]["chain"] == {"top1": 5.0, "top4": 5.0}
    assert scores["exact"]["cells"]["code@80"]["1"]["top1"] == 1.0  # the lags' shares are still there
    assert scores["late"]["pooled"]["chain"]["top1"] < 2.0
    with torch.no_grad():
        probabilities = target(ids).logits[0, -33:-1].softmax(-1).topk(4, dim=-1).values  # the echo's own, at lag 1
    assert scores["exact"]["pooled"]["confidence"]["top1"] == pytest.approx(float(probabilities[:, 0].mean()), rel=1e-5)
    assert scores["exact"]["pooled"]["confidence"]["top4"] == pytest.approx(float(probabilities.sum(-1).mean()), rel=1e-5)
    assert "chain" not in probe.agreements(target, {"exact": Echo(0)}, [("code", 80, ids)], scored=32)["exact"]["pooled"]


def test_feature_probe_from_scratch_draws_each_seed_its_own_untrained_draft():
    """feature_probe.py --init-draft none: every arm of a seed starts from the same untrained draft (the
    one train_draft would make for that recipe), another seed from another; "embedded" is the shipped one."""
    from dataclasses import replace

    from conftest import tiny_llama
    from hf_longspec.publishing.weights_digest import folder_weights_digest
    from hf_longspec.training.run import TrainRecipe

    probe = load_script("benchmarks/feature_probe.py")
    target = tiny_llama(layers=2, initializer_range=0.2)
    recipe = TrainRecipe(output_dir="", init_draft=None, seed=3, draft_overrides={"sliding_window": 16})
    first, again = probe.starting_draft(target, recipe), probe.starting_draft(target, recipe)
    other = probe.starting_draft(target, replace(recipe, seed=4))
    weights = lambda draft: draft.self_attn.q_proj.weight  # noqa: E731
    assert torch.equal(weights(first), weights(again)) and not torch.equal(weights(first), weights(other))


def test_feature_probe_wide_arm_trains_a_wider_mlp_and_leaves_the_others_alone():
    """feature_probe.py --arms wide_mlp: only that arm's recipe asks for the wider MLP (so the plain arm of
    the same seed is the product's draft), and an untrained draft is drawn that wide."""
    from conftest import tiny_llama
    from hf_longspec.publishing.weights_digest import folder_weights_digest
    from hf_longspec.training.run import TrainRecipe

    probe = load_script("benchmarks/feature_probe.py")
    target = tiny_llama(layers=2, initializer_range=0.2)
    recipe = TrainRecipe(output_dir="", init_draft=None, seed=3, draft_overrides={"sliding_window": 16})
    wide = probe.arm_recipe("wide_mlp", recipe, 96)
    assert wide.draft_overrides == {"sliding_window": 16, "intermediate_size": 96}
    assert all(probe.arm_recipe(arm, recipe, 96) is recipe for arm in probe.ARMS if arm != "wide_mlp")
    draft = probe.starting_draft(target, wide)
    assert draft.config.intermediate_size == 96 and draft.mlp.up_proj.weight.shape[0] == 96
    assert probe.starting_draft(target, recipe).config.intermediate_size != 96
    assert probe.run_label({"arm": "wide_mlp", "recipe": {"draft_overrides": wide.draft_overrides}}) == "wide_mlp 96"
    assert probe.run_label({"arm": "plain", "recipe": {"draft_overrides": recipe.draft_overrides}}) == "plain"


def test_feature_probe_layer_arms_read_their_own_target_layer(capsys):
    """feature_probe.py --arms layerN: the arm's draft reads target layer N's K/V (a config value generate()
    serves, so --with-tau measures it); drafts of other layers scored side by side each read their own layer,
    as they would scored alone; a name that is neither an arm nor layerN, and a layer arm asked to start from
    the shipped draft, are refused by name."""
    import argparse

    from conftest import tiny_llama
    from hf_longspec.training.run import TrainRecipe

    probe = load_script("benchmarks/feature_probe.py")
    target = tiny_llama(layers=3, initializer_range=0.2)
    recipe = TrainRecipe(output_dir="", init_draft=None, seed=3, draft_overrides={"sliding_window": 16})
    assert probe.arm_recipe("layer1", recipe, 96).draft_overrides == {"sliding_window": 16, "target_layer_index": 1}
    assert probe.arm_recipe("plain", recipe, 96) is recipe
    drafts = {name: probe.starting_draft(target, probe.arm_recipe(name, recipe, 96)).eval().bind(target)
              for name in ("plain", "layer0", "layer1")}
    assert [draft.target_layer_index for draft in drafts.values()] == [2, 0, 1]
    ids = torch.randint(0, 96, (1, 60), generator=torch.Generator().manual_seed(5))
    prompts = [("code", 60, ids)]
    together = probe.agreements(target, drafts, prompts, scored=24, chain_depth=1)
    for name, draft in drafts.items():  # confidence (a mean probability) moves with any other K/V
        assert together[name] == probe.agreements(target, {name: draft}, prompts, scored=24, chain_depth=1)[name]
    assert together["layer0"]["pooled"]["confidence"] != together["plain"]["pooled"]["confidence"]
    assert probe.parse_args(["--out", "x", "--arms", "plain", "layer22", "--with-tau", "--init-draft", "none"]).arms \
        == ["plain", "layer22"]
    with pytest.raises(SystemExit):  # the shipped draft learned the last layer's keys: refused before any loading
        probe.parse_args(["--out", "x", "--arms", "plain", "layer22"])
    assert "read another target layer than the shipped draft was trained on" in capsys.readouterr().err
    for wrong in ("layer", "layer-1", "layers2", "plus", "plus1_", "plus-1"):
        with pytest.raises(argparse.ArgumentTypeError, match="allowed: .*layerN.*plusN_M"):
            probe.arm_name(wrong)


def test_feature_probe_plus_arms_read_the_last_layer_and_their_extra_layers():
    """feature_probe.py --arms plusN_M: the arm's draft reads the last target layer's K/V and also layers N
    and M (extra_target_layer_indices, served by generate()); scored beside others it is handed exactly those
    layers, side by side in its own order (the same agreement as scored alone, and not that of a draft whose
    blocks read other layers); unlike a layer arm, taken from the shipped draft (its new blocks grafted on)."""
    from conftest import tiny_llama
    from hf_longspec.training.run import TrainRecipe

    probe = load_script("benchmarks/feature_probe.py")
    target = tiny_llama(layers=3, initializer_range=0.2)
    recipe = TrainRecipe(output_dir="", init_draft=None, seed=3, draft_overrides={"sliding_window": 16})
    assert probe.arm_recipe("plus0_1", recipe, 96).draft_overrides == {"sliding_window": 16,
                                                                      "extra_target_layer_indices": [0, 1]}
    drafts = {name: probe.starting_draft(target, probe.arm_recipe(name, recipe, 96)).eval().bind(target)
              for name in ("plain", "plus0_1", "plus1_0")}
    assert [draft.target_layers for draft in drafts.values()] == [(2,), (2, 0, 1), (2, 1, 0)]
    drafts["plus1_0"].load_state_dict(drafts["plus0_1"].state_dict())  # the same weights, its blocks on other layers
    ids = torch.randint(0, 96, (1, 60), generator=torch.Generator().manual_seed(5))
    prompts = [("code", 60, ids)]
    together = probe.agreements(target, drafts, prompts, scored=24, chain_depth=1)
    for name, draft in drafts.items():
        assert together[name] == probe.agreements(target, {name: draft}, prompts, scored=24, chain_depth=1)[name]
    assert together["plus0_1"]["pooled"]["confidence"] != together["plus1_0"]["pooled"]["confidence"]
    assert probe.decodable("plus15_22") and probe.parse_args(
        ["--out", "x", "--arms", "plain", "plus15", "--with-tau", "--init-draft", "none"]).arms == ["plain", "plus15"]
    assert probe.parse_args(["--out", "x", "--arms", "plain", "plus15"]).arms == ["plain", "plus15"]  # not refused


def test_feature_probe_bf16_rope_arm_rounds_the_frequencies_until_removed():
    """feature_probe.py --arms bf16_rope: the draft trains on RoPE angles from bf16-rounded frequencies (what
    main gave a new draft on a bf16 target before the fix) and, the hook removed, runs the exact ones again;
    --with-tau refuses arms generate() cannot run."""
    from conftest import tiny_llama
    from hf_longspec import LongSpecDraftModel

    probe = load_script("benchmarks/feature_probe.py")
    target = tiny_llama(layers=1, max_positions=9000)
    draft = LongSpecDraftModel.from_target(target)
    positions = torch.arange(8000)[None]
    exact_cos, exact_sin = draft.rotary_emb(positions, torch.float32)
    rounded = positions[..., None].float() * draft.rotary_emb.inv_freq.bfloat16().float()
    hook = probe.change_draft("bf16_rope", draft, target, seed=0)
    cos, sin = draft.rotary_emb(positions, torch.float32)
    assert torch.equal(cos, torch.cat((rounded, rounded), -1).cos()) and torch.equal(sin, torch.cat((rounded, rounded), -1).sin())
    assert (cos - exact_cos).abs().max() > 0.5  # radians off by position 8000
    draft.to(torch.float32)  # train_draft's cast keeps the arm's rounding (it lives in the forward)
    assert torch.equal(draft.rotary_emb(positions, torch.float32)[0], cos)
    hook.remove()
    hook.remove()  # the probe removes it after training and again on the way out
    assert torch.equal(draft.rotary_emb(positions, torch.float32)[0], exact_cos)
    assert probe.parse_args(["--out", "x", "--arms", "plain", "bf16_rope", "--with-tau"]).with_tau
    with pytest.raises(SystemExit):
        probe.parse_args(["--out", "x", "--arms", "plain", "final_state", "--with-tau"])


def test_feature_probe_scores_finished_draft_folders_as_the_drafts_themselves(tmp_path):
    """feature_probe.py --score-drafts NAME=FOLDER: a saved draft folder scores exactly what the draft it
    was saved from scores (loaded in the target's dtype, bound to it), recorded with its MLP width and
    step; a spec that is not NAME=FOLDER, or a folder without config.json, is refused by name."""
    import argparse
    from types import SimpleNamespace

    from conftest import tiny_llama
    from hf_longspec.evaluation import measure_tau
    from hf_longspec.publishing.weights_digest import folder_weights_digest
    from hf_longspec.training.run import TrainRecipe

    probe = load_script("benchmarks/feature_probe.py")
    target = tiny_llama(layers=2, initializer_range=0.2)
    drafts = {}
    for name, width in (("plain", 128), ("wide", 384)):
        recipe = TrainRecipe(output_dir="", init_draft=None, seed=len(drafts),
                             draft_overrides={"sliding_window": 16, "intermediate_size": width})
        drafts[name] = probe.starting_draft(target, recipe).eval().bind(target)
        drafts[name].save_pretrained(tmp_path / name)
    (tmp_path / "wide" / "training_speed.json").write_text(json.dumps({"global_step": 7}))
    prompts = [("prose", 80, torch.randint(0, 96, (1, 80), generator=torch.Generator().manual_seed(3)))]
    specs = [probe.name_and_folder(f"{name}={tmp_path / name}") for name in drafts]
    args = SimpleNamespace(score_drafts=specs, scored_positions=32, score_on="prompt", continuation_tokens=8, chain_depth=0,
                           with_tau=False, round_rope=False)
    report = probe.score_drafts(args, target, prompts)
    for row, (name, draft) in zip(report["scored"], drafts.items()):
        assert row["name"] == name and row["pooled"] == probe.agreement(target, draft, prompts, 32)["pooled"]
        assert row["weights_digest"] == folder_weights_digest(tmp_path / name)  # which weights, not only a path
    # on the target's own continuation: its greedy tokens, scored at the positions that predict them
    (kind, length, longer), = probe.continued(target, prompts, 8)
    assert longer.shape == (1, 88) and torch.equal(longer[:, :80], prompts[0][2])
    with torch.no_grad():
        assert torch.equal(target(longer).logits[0, 79:87].argmax(-1), longer[0, 80:])
    on_text = probe.score_drafts(SimpleNamespace(**{**vars(args), "score_on": "continuation", "chain_depth": 3}),
                                 target, prompts)
    assert on_text["scored"][1]["cells"] == probe.agreements(target, {"wide": drafts["wide"]}, [(kind, length, longer)], 8,
                                                             chain_depth=3)["wide"]["cells"]
    assert set(on_text["scored"][1]["pooled"]) == {"1", "3", "chain", "confidence"}
    # --with-tau: each draft's tau, the tree alone, on the prompts as given (not their continuations)
    with_tau = probe.score_drafts(SimpleNamespace(**{**vars(args), "score_drafts": specs[1:], "with_tau": True}), target, prompts)
    expected = measure_tau(target, drafts["wide"], prompts, max_new_tokens=8, longspec_compile=False, longspec_lookup_tokens=0)
    assert with_tau["scored"][0]["tau"] == expected["tau"] and with_tau["scored"][0]["tau_per_prompt"] == [expected["tau"]]
    assert "tau" not in report["scored"][0]
    # --round-rope: the drafts run on bf16-rounded RoPE frequencies, as `.to(torch.bfloat16)` left them before the fix
    # (chain_depth 1 adds the draft's confidence, a mean probability: it moves with any change of angle)
    rounding = SimpleNamespace(**{**vars(args), "score_drafts": specs[1:], "round_rope": True, "chain_depth": 1})
    rounded = probe.score_drafts(rounding, target, prompts)["scored"][0]["cells"]
    exact = probe.agreements(target, {"wide": drafts["wide"]}, prompts, 32, chain_depth=1)["wide"]["cells"]
    probe._RoundedRope(drafts["wide"])
    assert rounded == probe.agreements(target, {"wide": drafts["wide"]}, prompts, 32, chain_depth=1)["wide"]["cells"] != exact
    with pytest.raises(SystemExit, match="repeat one"):
        probe.score_drafts(SimpleNamespace(**{**vars(args), "score_drafts": specs[:1] * 2}), target, prompts)
    assert [(row["intermediate_size"], row["global_step"]) for row in report["scored"]] == [(128, None), (384, 7)]
    assert report["scored"][0]["pooled"] != report["scored"][1]["pooled"]  # two drafts, two scores
    for spec, match in (("plain", "allowed NAME=FOLDER"), (f"x={tmp_path}", "holds no config.json")):
        with pytest.raises(argparse.ArgumentTypeError, match=match):
            probe.name_and_folder(spec)
    assert probe.name_and_folder("shipped=embedded") == ("shipped", "embedded")


def test_feature_probe_tinit_arms_draw_the_draft_from_the_target_and_pair_against_a_chosen_arm(capsys):
    """feature_probe --arms plus4 plus4_tinit --paired-base plus4: "_tinit" keeps its arm's recipe and adds
    draft_init "target" (untrained drafts only), "_rollK" rollout_steps K; the paired table pairs against --paired-base, which must be
    one of the arms."""
    from dataclasses import replace

    from hf_longspec.training.run import TrainRecipe

    probe = load_script("benchmarks/feature_probe.py")
    args = probe.parse_args(["--out", "x", "--arms", "plus4", "plus4_tinit", "--init-draft", "none", "--with-tau",
                             "--paired-base", "plus4"])
    base = TrainRecipe(output_dir="")
    tinit, plain = probe.arm_recipe("plus4_tinit", base, 4608), probe.arm_recipe("plus4", base, 4608)
    assert tinit == replace(plain, draft_init="target") and plain.draft_init == "random"
    assert tinit.draft_overrides == {"extra_target_layer_indices": [4]}
    assert probe.arm_recipe("plain_tinit", base, 4608) == replace(base, draft_init="target")
    assert probe.arm_recipe("plus4_roll3", base, 4608) == replace(plain, rollout_steps=3)
    assert probe.arm_recipe("plus4_roll2_tinit", base, 4608) == replace(plain, rollout_steps=2, draft_init="target")
    assert probe.arm_parts("_roll3") == ("_roll3", {})  # a suffix alone names no arm
    # the method's own two ideas, and Flash Noisy Training's shifts (forty-first session)
    assert probe.arm_recipe("plus4_noao", base, 4608) == replace(plain, anchor_offset=False)
    assert probe.arm_recipe("plus4_nonoisy", base, 4608) == replace(plain, noisy=False)
    assert probe.arm_recipe("plus4_reach", base, 4608) == replace(plain, noise_shift_weights=[1.0, 0.78, 0.64, 0.49, 0.38])
    assert probe.arm_recipe("plus4_shifts5_tinit", base, 4608) == replace(plain, noise_shift_weights=[1.0] * 5,
                                                                          draft_init="target")
    for argv, message in ((["--arms", "plain_tinit"], "draw an untrained draft from the target's weights"),
                          (["--arms", "plus4", "--paired-base", "plain", "--init-draft", "none"], "--paired-base 'plain' is not"),
                          (["--arms", "second_layer_tinit", "--init-draft", "none", "--with-tau"], "cannot measure"),
                          (["--arms", "plain_tint", "--init-draft", "none"], "arm 'plain_tint'")):
        with pytest.raises(SystemExit):
            probe.parse_args(["--out", "x", *argv])
        assert message in capsys.readouterr().err
    runs = [{"arm": arm, "seed": seed, "recipe": {"draft_overrides": {}}, "tau_per_prompt": taus}
            for arm, seed, taus in (("plus4", 0, [2.0, 3.0]), ("plus4_tinit", 0, [2.5, 3.0]),
                                    ("plus4", 1, [2.0, 2.0]), ("plus4_tinit", 1, [2.5, 3.0]))]
    table = probe.paired_table({"settings": vars(args), "runs": runs})
    assert "| plus4_tinit | plus4 | 0, 1 | +0.500 ± 0.000 | 2 / 0 |" in table


def test_join_puts_runs_of_one_draft_together_and_refuses_runs_that_disagree(tau_curve, tmp_path, capsys):
    """tau_curve --join: the prompts of a 1k run and a 2k-8k run of one draft in one curve, a prompt both
    measured kept once; refused when the draft, a setting, or a shared prompt's tokens differ."""
    def record(length, digest, tau, tokens):
        return {"length": length, "kind": "code", "prompt_digest": digest, "tau": tau, "tokens": tokens,
                "histogram": {"1": 1, str(round(tau)): 1}}

    def run(name, records, **changes):
        settings = {"new_tokens": 128, "tree_widths": [4, 16], "lookup_tokens": 0, "align": "end", "dtype": "bfloat16",
                    "seed": 0, **changes.pop("settings", {})}
        result = {"machine": {"name": name}, "settings": settings, "runs": records,
                  "draft": {"weights_digest": changes.get("digest", "w1")}}
        if "window_read" in changes:  # what runs record since the fortieth session
            result["draft"]["cross_attention_window"] = changes["window_read"]
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(result))
        return str(path)

    long_run = run("long", [record(2048, "a2", 3.0, [1, 2]), record(8000, "a8", 4.0, [3, 4])])
    short_run = run("short", [record(1024, "a1", 2.0, [5]), record(8000, "a8", 4.0, [3, 4])])
    result = tau_curve.main(["--out", str(tmp_path / "joined"), "--join", long_run, short_run])
    assert [(r["length"], r["prompt_digest"]) for r in result["runs"]] == [(2048, "a2"), (8000, "a8"), (1024, "a1")]
    assert [(row["length"], row["tau_mean"]) for row in result["rows"]] == [(1024, 2.0), (2048, 3.0), (8000, 4.0)]
    saved = json.loads((tmp_path / "joined" / "tau_curve.json").read_text())
    assert saved["join"] == [long_run, short_run] and (tmp_path / "joined" / "tau_curve.md").is_file()
    capsys.readouterr()
    other_tokens = run("other", [record(8000, "a8", 4.0, [3, 9])])
    with pytest.raises(ValueError, match="8000-token code prompt a8 gave other tokens"):
        tau_curve.joined([long_run, other_tokens])
    for name, changes, named in (("drafted", {"digest": "w2"}, "draft weights_digest"),
                                 ("chained", {"settings": {"lookup_tokens": 32}}, "lookup_tokens"),
                                 ("reranked", {"settings": {"rerank_leaves": True}}, "rerank_leaves")):
        with pytest.raises(ValueError, match=f"measured otherwise than .*long.json \\({named}\\)"):
            tau_curve.joined([long_run, run(name, [record(1024, "b1", 2.0, [1])], **changes)])
    # the window the calls read decides, not how it was asked for: the config's 2048 and a named 2048 join
    configs = run("config", [record(2048, "c2", 3.0, [1])], window_read=2048)
    named = run("named", [record(1024, "c1", 2.0, [2])], window_read=2048, settings={"cross_attention_window": 2048})
    assert len(tau_curve.joined([configs, named])["runs"]) == 2
    whole = run("whole", [record(1024, "c1", 2.0, [2])], window_read=None, settings={"cross_attention_window": 0})
    with pytest.raises(ValueError, match="measured otherwise than .*config.json \\(cross_attention_window\\)"):
        tau_curve.joined([configs, whole])
    with pytest.raises(ValueError, match="\\(cross_attention_window\\)"):  # a run before the record: not known
        tau_curve.joined([configs, long_run])
    # a run before re-ranking existed (no rerank_leaves) never re-ranked: it joins a run that says False
    plain = run("plain", [record(1024, "a1", 2.0, [5])], settings={"rerank_leaves": False})
    assert len(tau_curve.joined([long_run, plain])["runs"]) == 3


def test_prompt_overlap_finds_a_prompt_whose_ending_another_holds():
    """benchmarks/prompt_overlap.py: prompt 1 ends in text prompt 0 holds (a license two packages ship),
    prompt 2 is text of its own; the shares and groups say so."""
    overlap = load_script("benchmarks/prompt_overlap.py")
    shared = list(range(1000, 1400))
    prompts = [{"index": 0, "source": "a", "input_ids": list(range(0, 200)) + shared},
               {"index": 1, "source": "b", "input_ids": list(range(5000, 5300)) + shared[:300]},
               {"index": 2, "source": "c", "input_ids": list(range(9000, 9600))}]
    rows = overlap.overlap_table(prompts, window=256, threshold=0.2)
    assert rows[1]["largest_share"] == 1.0 and rows[1]["with_index"] == 0  # its whole window is in prompt 0
    assert rows[2]["largest_share"] == 0.0
    assert [row["group"] for row in rows] == [0, 0, 1]


def test_a_run_from_a_later_first_prompt_measures_the_prompts_a_longer_run_has_there(tau_curve, embedded):
    """--first-prompt I: indices I.. per (length, kind), the same prompts a run of more prompts has at those
    indices, so two runs join (--join) into one of more prompts without measuring the first ones twice."""
    _, tokenizer = embedded
    kinds = ["code", "prose", "chat"]
    longer = tau_curve.build_prompts(tokenizer, [96, 128], kinds, 3)
    later = tau_curve.build_prompts(tokenizer, [96, 128], kinds, 2, first_index=1)
    assert [p["index"] for p in later] == [1, 2] * 6
    assert later == [p for p in longer if p["index"] >= 1]
    with pytest.raises(SystemExit):
        tau_curve.parse_args(["--out", "x", "--first-prompt", "-1"])
