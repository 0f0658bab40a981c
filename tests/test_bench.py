"""`hf-longspec bench` and benchmarks/scale_study.py: quick CPU runs, the exactness metric, the table."""

import importlib.util
import json

import pytest
import torch

from hf_longspec.attention import hybrid_name_for

from conftest import REPO, load_script, perturbed_pair, random_prompt, tiny_llama
from hf_longspec import LongSpecDraftModel
from hf_longspec.bench.exactness import metric_dir, token_exact_match
from hf_longspec.bench.methods import METHOD_NAMES, build_methods
from hf_longspec.bench.runner import RunRecord
from hf_longspec.bench.summary import markdown_table, summarize


def _metric_function():
    spec = importlib.util.spec_from_file_location("token_exact_match_file", metric_dir() / "token_exact_match.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.token_exact_match


PREDICTIONS = [[1, 2, 3], [4, 5], [7, 8, 9], [1]]
REFERENCES = [[1, 2, 3], [4, 6], [7, 8], [1, 2]]


def test_token_exact_match_metric():
    expected = {"exact_match": 0.25, "first_divergence": [-1, 1, 2, 1], "mean_matched_prefix": (3 + 1 + 2 + 1) / 4}
    plain = _metric_function()(PREDICTIONS, REFERENCES)
    assert {k: plain[k] for k in expected} == expected
    assert plain["token_accuracy"] == pytest.approx((1 + 1 / 2 + 2 / 3 + 1 / 2) / 4)
    assert token_exact_match().compute(PREDICTIONS, REFERENCES) == plain  # evaluate, or the file's function without it


def test_token_exact_match_loads_with_evaluate_offline():
    evaluate = pytest.importorskip("evaluate")
    metric = evaluate.load(str(metric_dir()))
    assert metric.compute(predictions=PREDICTIONS, references=REFERENCES) == _metric_function()(PREDICTIONS, REFERENCES)


def _record(method, length, seconds, tokens, forwards, prompt=0):
    return RunRecord(method=method, kind="code", prompt_index=prompt, source="pkg", length=length,
                     new_tokens=len(tokens), wall_s=seconds + 1.0, prefill_s=1.0, prefill_tokens=1,
                     target_forwards=forwards, decode_bytes=10**9, memory={"kind": "cpu_rss_delta", "rss_delta_bytes": 0},
                     longspec_stats={"emitted_tokens": len(tokens) - 1, "rounds": forwards - 1}
                     if method.startswith("longspec") else None, tokens=tokens)


def test_methods_speedups_and_table():
    draft = LongSpecDraftModel.from_target(tiny_llama(), tree_widths=[2, 3, 3])
    methods = build_methods(["longspec_tree", "longspec_chain", "pld"], draft, pld_tokens=7)
    assert [m.name for m in methods] == [n for n in METHOD_NAMES if n != "longspec_tree_eager"]  # vanillas always run
    by_name = {m.name: m for m in methods}
    assert by_name["longspec_chain"].generate_kwargs["longspec_tree_widths"] == [1, 1, 1]
    assert by_name["longspec_tree"].generate_kwargs["longspec_tree_widths"] == [2, 3, 3]
    assert by_name["pld"].generate_kwargs == {"prompt_lookup_num_tokens": 7}
    assert by_name["longspec_tree"].same_backend_vanilla == "vanilla_sdpa"

    tokens = list(range(9))
    records = [
        _record("vanilla_static", 512, 2.0, tokens, 9),
        _record("vanilla_eager", 512, 4.0, tokens, 9), _record("vanilla_sdpa", 512, 8.0, tokens, 9),
        _record("pld", 512, 4.0, tokens, 5), _record("longspec_chain", 512, 2.0, tokens, 3),
        _record("longspec_tree", 512, 1.0, tokens[:5] + [0, 0, 0, 0], 3),
    ]
    rows = {row["method"]: row for row in summarize(records, methods, copy_bytes_per_s=4e9)}
    tree = rows["longspec_tree"]
    assert tree["speedup_vs_sdpa"] == pytest.approx(8.0) and tree["speedup_vs_eager"] == pytest.approx(4.0)
    assert tree["speedup_vs_static"] == pytest.approx(2.0)
    assert tree["tokens_per_target_forward"] == pytest.approx(4.0) and tree["longspec_tau"] == pytest.approx(4.0)
    assert tree["achieved_bytes_per_s"] == pytest.approx(1e9) and tree["fraction_of_copy_bandwidth"] == pytest.approx(0.25)
    assert tree["exactness_vs_sdpa"]["first_divergence"] == [5]
    assert rows["pld"]["exactness_vs_sdpa"]["exact_match"] == 1.0 and "exactness_vs_sdpa" not in rows["vanilla_sdpa"]
    table = markdown_table(list(rows.values()))
    assert "| 512 | LongSpec tree 2-3-3 (hybrid) |" in table and "0% (first diff @5)" in table
    assert len({line.count("|") for line in table.splitlines()}) == 1


def test_workloads_cut_from_local_code_and_prose(embedded):
    from hf_longspec.bench.workloads import build_workloads

    _, tokenizer = embedded
    workloads = build_workloads(tokenizer, [96, 48], ("code", "prose"), prompts_per_length=1)
    assert [(w.length, w.kind) for w in workloads] == [(48, "code"), (48, "prose"), (96, "code"), (96, "prose")]
    assert all(len(w.input_ids) == w.length for w in workloads)
    short, long = workloads[0], workloads[2]
    assert short.source == long.source != "mixed-packages"  # one package's sources as the context
    assert long.input_ids[:48] == short.input_ids  # longer prompts only add context before the cut


def test_bench_cli_quick_on_the_embedded_target(embedded, tmp_path, monkeypatch, capsys):
    from hf_longspec import cli
    from hf_longspec.bench import harness

    model, _ = embedded
    attention_before = model.config._attn_implementation
    monkeypatch.setenv("TRITON_INTERPRET", "0")  # PyTorch math on the CPU, as a plain CLI run (kernels tested elsewhere)
    monkeypatch.setattr(harness, "load_target", lambda args: embedded)  # reuse the session's loaded SmolLM2
    assert cli.main(["bench", "--quick", "--output", str(tmp_path), "--no-progress", "--draft", "untrained"]) == 0

    result = json.loads((tmp_path / "bench.json").read_text())
    assert result["schema"] == "hf-longspec-bench/1" and result["settings"]["lengths"] == [256]
    assert {"device_name", "torch", "transformers", "date_utc", "command_line"} <= set(result["machine"])
    rows = {row["method"]: row for row in result["rows"]}
    assert set(rows) == set(METHOD_NAMES)
    for name, row in rows.items():
        assert row["new_tokens"] == 8 and row["tokens_per_s"] > 0
        if name != "vanilla_sdpa":
            assert row["exactness_vs_sdpa"]["exact_match"] == 1.0, name  # float32 on the CPU: identical tokens
    assert rows["vanilla_sdpa"]["tokens_per_target_forward"] == 1.0
    assert rows["longspec_tree"]["longspec_rounds"] >= 1 and rows["longspec_tree"]["longspec_tau"] >= 1.0
    assert result["draft"]["trained"] is False and any("UNTRAINED" in note for note in result["notes"])
    assert (tmp_path / "bench.md").read_text().rstrip().endswith(capsys.readouterr().out.rstrip().splitlines()[-1])
    if importlib.util.find_spec("matplotlib") is not None:
        assert (tmp_path / "speedup.png").stat().st_size > 0
    # binding the draft leaves the target on the hybrid implementation that keeps `attention_before`
    # for every non-tree call
    assert model.config._attn_implementation == hybrid_name_for(attention_before)


def test_bench_refuses_new_tokens_and_sizes_it_cannot_run_before_generating(embedded, tmp_path, monkeypatch, capsys):
    """`hf-longspec bench --max-new-tokens 9000` leaves no room for a prompt within SmolLM2's 8192 positions, and
    0 new tokens, 0 prompts or a prompt of 0 tokens are no benchmark: each exits 2 naming the argument and what is
    allowed, without a traceback, before any generate call and without writing results (before, a traceback from
    the embedding of an empty prompt, or from transformers' own check)."""
    from hf_longspec import cli
    from hf_longspec.bench import harness

    class GenerateReached(Exception):
        pass

    def no_generate(model, *args, **kwargs):
        raise GenerateReached

    model, _ = embedded
    monkeypatch.setattr(harness, "load_target", lambda args: embedded)
    monkeypatch.setattr(type(model), "generate", no_generate)
    out = tmp_path / "results"
    refused = {("--max-new-tokens", "9000"): "--max-new-tokens 9000 leaves no room for a prompt within the "
                                             "target's max_position_embeddings (8192); allowed: at most 8191",
               ("--max-new-tokens", "0"): "--max-new-tokens 0: allowed: an int >= 1",
               ("--warmup-new-tokens", "0"): "--warmup-new-tokens 0: allowed: an int >= 1",
               ("--prompts-per-length", "0"): "--prompts-per-length 0: allowed: an int >= 1",
               ("--lengths", "256", "-5"): "--lengths -5: allowed: an int >= 1",
               ("--lengths", "-5", "256"): "--lengths -5: allowed: an int >= 1"}  # any of them, not the last only
    for arguments, message in refused.items():
        assert cli.main(["bench", "--quick", "--output", str(out), "--no-progress", *arguments]) == 2, arguments
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, (arguments, err)
    assert not out.exists()
    with pytest.raises(GenerateReached):  # the largest allowed new-token count goes on to generate
        cli.main(["bench", "--quick", "--output", str(out), "--no-progress", "--draft", "untrained",
                  "--max-new-tokens", "8191"])


def test_scale_study_quick(tmp_path, monkeypatch, capsys):
    """The scale study's CPU smoke run: the round is LongSpecDecoder's, parts and whole are reported."""
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    study = load_script("benchmarks/scale_study.py")
    study.main(["--quick", "--contexts", "64", "160", "--vanilla-contexts", "160", "--repeats", "1",
                "--trees", "2-2", "--out", str(tmp_path / "scale")])
    result = json.loads((tmp_path / "scale" / "scale_study.json").read_text())
    assert [(row["context"], row["tree_widths"]) for row in result["rows"]] == [
        (64, [4, 16, 16, 16, 16]), (64, [2, 2]), (160, [4, 16, 16, 16, 16]), (160, [2, 2])]
    assert result["tree"] == [4, 16, 16, 16, 16]
    result["rows"] = [row for row in result["rows"] if row["tree_widths"] == result["tree"]]
    for row in result["rows"]:
        assert row["round_ms"] > 0 and row["draft_ms"] > 0 and row["verify_forward_ms"] > 0
        assert row["round_floor_ms"] > row["vanilla_floor_ms"] > 0
    assert "vanilla_static_step_ms" not in result["rows"][0] and result["rows"][1]["vanilla_static_step_ms"] > 0
    assert result["rows"][0]["draft_state_bytes"] == result["rows"][1]["draft_state_bytes"]  # constant in context
    assert "| context | batch | tree | round (graph) |" in capsys.readouterr().out


def test_profile_round_quick_llama_shape(tmp_path, monkeypatch):
    """The round profiler's CPU smoke run (a tiny Llama for the 8B shape): each phase timed alone and
    profiled, so the script the GPU sessions rely on cannot rot unseen."""
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    profiler = load_script("benchmarks/profile_round.py")
    profiler.main(["--quick", "--shape", "llama8b", "--length", "120", "--out", str(tmp_path)])
    result = json.loads((tmp_path / "profile_llama8b_120.json").read_text())
    assert result["tree_widths"] == [4, 16, 16, 16, 16]
    assert all(result["graph"][f"{phase}_ms"] > 0 for phase in ("draft", "verify_forward", "round"))
    assert set(result["phases"]) == {"draft", "verify", "accept_commit"}
    assert all(phase["top_kernels"] for phase in result["phases"].values())


def test_attention_tiles_quick(tmp_path, monkeypatch, capsys):
    """The kernel tiling sweep's CPU smoke run (Triton interpreter): every tiling checked against the
    default one and timed, the best reported per shape, so the GPU sessions' sweep cannot rot unseen."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    sweep = load_script("benchmarks/attention_tiles.py")
    sweep.main(["--quick", "--out", str(tmp_path)])
    result = json.loads((tmp_path / "attention_tiles.json").read_text())
    assert [(row["batch"], row["context"], row["tree_rows"]) for row in result["rows"]] == sweep.QUICK_SHAPES
    for row in result["rows"]:
        assert all(entry["us"] > 0 and entry["skipped"] is None for entry in row["all"])  # no tiling refused
        assert row["best"]["us"] == min(entry["us"] for entry in row["all"])
    assert "| batch | context | tree rows |" in capsys.readouterr().out


def test_rows_cost_measures_each_row_count_against_one_row(embedded, tmp_path, monkeypatch, capsys):
    """benchmarks/rows_cost.py on the embedded target, tiny: one forward per row count after the same
    cached prompt, the ratio to one row, the table."""
    script = load_script("benchmarks/rows_cost.py")
    model, _ = embedded
    monkeypatch.setattr(script, "load_embedded_target", lambda **kwargs: embedded)  # the session's SmolLM2
    attention_before = model.config._attn_implementation
    try:
        assert script.main(["--out", str(tmp_path), "--context", "64", "--rows", "1", "3", "--repeats", "1"]) == 0
    finally:
        model.set_attn_implementation(attention_before)  # the script switches the target to sdpa
    result = json.loads((tmp_path / "rows_cost.json").read_text())
    assert [row["rows"] for row in result["rows"]] == [1, 3] and result["rows"][0]["vs_one_row"] == 1.0
    assert all(row["ms"] > 0 for row in result["rows"])
    assert "| 3 |" in capsys.readouterr().out


def test_batch_exactness_compares_a_left_padded_batch_with_vanilla(embedded, tmp_path, monkeypatch, capsys):
    """benchmarks/batch_exactness.py (the GPU's float32 batch check) on the session's SmolLM2, tiny: rows of
    two lengths, equal to vanilla; a LongSpec output one token off is reported at that token."""
    script = load_script("benchmarks/batch_exactness.py")
    model, _ = embedded
    monkeypatch.setattr(script, "load_embedded_target", lambda **kwargs: embedded)
    attention_before = model.config._attn_implementation
    try:
        assert script.main(["--out", str(tmp_path), "--quick", "--forms", "default"]) == 0  # "tree" below
    finally:
        model.set_attn_implementation(attention_before)  # vanilla switches the target to sdpa
    result = json.loads((tmp_path / "batch_exactness.json").read_text())
    assert [r["form"] for r in result["results"]] == ["default"]
    assert [row["prompt_tokens"] for row in result["results"][0]["rows"]] == [96, 64]  # unequal: left padding
    assert all(r["equal_rows"] == 2 and r["output_shapes_equal"] for r in result["results"])
    assert "| default | 2 / 2 |" in capsys.readouterr().out
    real_generate = type(model).generate

    def one_token_off(self, *args, **kwargs):
        output = real_generate(self, *args, **kwargs)
        if "assistant_model" in kwargs:
            output[1, -3] += 1
        return output

    monkeypatch.setattr(type(model), "generate", one_token_off)
    batch = embedded[1].pad({"input_ids": [[5] * 96, [6] * 64]}, padding_side="left", return_tensors="pt")
    off = script.compare(model, script.load_embedded_draft(model), batch["input_ids"], batch["attention_mask"], 8, "tree")
    model.set_attn_implementation(attention_before)
    assert [row["first_difference"] for row in off["rows"]] == [None, 5] and off["equal_rows"] == 1


def test_draft_width_cost_quick(tmp_path, monkeypatch, capsys, embedded):
    """benchmarks/draft_width_cost.py on the CPU: the shipped draft and the same draft grown to 3x its MLP
    timed through the same round at one context, each row naming its width and MLP bytes, and the table
    giving each round against the shipped width's."""
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    cost = load_script("benchmarks/draft_width_cost.py")
    monkeypatch.setattr(cost, "load_embedded_target", lambda **kwargs: embedded)  # the session's SmolLM2
    cost.main(["--out", str(tmp_path), "--contexts", "96", "--repeats", "1", "--widths", "4608"])
    rows = json.loads((tmp_path / "draft_width_cost.json").read_text())["rows"]
    assert [(row["context"], row["intermediate_size"]) for row in rows] == [(96, 1536), (96, 4608)]
    assert rows[1]["mlp_bytes"] == 3 * rows[0]["mlp_bytes"]
    assert all(row["round_ms"] > 0 and row["draft_ms"] > 0 and row["tree_widths"] == [4, 16, 16, 16, 16] for row in rows)
    assert "| 96 | 1536 | " in capsys.readouterr().out


def test_source_digest_names_the_code_that_ran_not_the_commit(tmp_path):
    """bench.machine.source_digest: a benchmark JSON's record of the code, which an edit to any Python file
    under src/hf_longspec or benchmarks changes and a file elsewhere does not; the repository's own digest
    is what machine_info stores."""
    from hf_longspec.bench.machine import machine_info, source_digest

    for folder, text in (("src/hf_longspec", "x = 1\n"), ("benchmarks", "y = 2\n")):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "a.py").write_text(text)
    before = source_digest(tmp_path)
    (tmp_path / "docs.py").write_text("ignored\n")
    assert source_digest(tmp_path) == before
    (tmp_path / "benchmarks" / "a.py").write_text("y = 3\n")
    assert source_digest(tmp_path) != before
    (tmp_path / "benchmarks" / "a.py").write_text("y = 2\n")
    (tmp_path / "benchmarks" / "b.py").write_text("")  # a new file counts too
    assert source_digest(tmp_path) != before
    assert machine_info(torch.device("cpu"))["source_digest"] == source_digest(REPO) != before


def test_decode_bench_times_a_cross_attention_window_as_a_method_of_its_own(monkeypatch, capsys):
    """benchmarks/decode_bench.py --windows W (thirty-fourth session: the window's end-to-end speed beside the whole
    read, in one run): longspec_windowW is the shipped draft asked for longspec_cross_attention_window=W, and its
    record's stats say that window was read; the float32 check gets each window too; a negative W is refused
    before any model loads."""
    import argparse

    bench = load_script("benchmarks/decode_bench.py")
    args = argparse.Namespace(lookups=[16], windows=[8, 0], chains=[2], trees=["2-2"], rounds_only=True,
                              rerank_leaves=True)
    variants = bench.variant_methods(args)
    assert list(variants) == ["longspec_lookup16", "longspec_window8", "longspec_window0", "longspec_chains2",
                              "longspec_rounds_only", "longspec_rerank", "longspec_lookup16_rerank", "longspec_tree_2-2",
                              "longspec_tree_2-2_rerank"]
    # and each --trees shape re-ranked (forty-fourth session: more leaves, 4-16-16-16-32+0, against their round cost)
    assert variants["longspec_tree_2-2_rerank"] == {"assistant_model": True, "longspec_tree_widths": [2, 2],
                                                    "longspec_rerank_leaves": True}
    # --rerank-leaves (forty-third session): the tree's leaves re-ranked, for the default and each --lookups K
    assert variants["longspec_lookup16_rerank"] == {"assistant_model": True, "longspec_lookup_tokens": 16,
                                                    "longspec_rerank_leaves": True}
    assert variants["longspec_chains2"] == {"assistant_model": True, "longspec_lookup_chains": 2}
    # --rounds-only (thirty-ninth session): the shipped decoder without plain steps, beside the default
    assert variants["longspec_rounds_only"] == {"assistant_model": True, "longspec_plain_steps": False}
    assert variants["longspec_window8"] == {"assistant_model": True, "longspec_cross_attention_window": 8}
    target, draft = perturbed_pair(widths=(2, 2))
    eager = {"longspec_cuda_graphs": False, "longspec_compile": False}
    monkeypatch.setitem(bench.METHODS, "longspec_window8", {**variants["longspec_window8"], **eager})
    ids = random_prompt()
    reference = bench.run(target, {True: draft}, "vanilla_dynamic", ids, 12)["tokens"]
    record = bench.run(target, {True: draft}, "longspec_window8", ids, 12)
    assert record["tokens"] == reference and record["stats"]["cross_attention_window"] == 8
    monkeypatch.setitem(bench.METHODS, "longspec_rerank", {**variants["longspec_rerank"], **eager})
    record = bench.run(target, {True: draft}, "longspec_rerank", ids, 12)
    assert record["tokens"] == reference and record["stats"]["rerank_leaves"]
    from hf_longspec.evaluation import prompt_digest  # every record names its prompt's tokens (forty-first session)
    assert record["prompt_digest"] == prompt_digest(ids) != prompt_digest(ids[:, 1:])
    assert draft.config.cross_attention_window is None

    monkeypatch.setattr("sys.argv", ["decode_bench.py", "--out", "/tmp/unused", "--windows", "2048", "-1"])
    with pytest.raises(SystemExit) as refused:
        bench.main()
    assert refused.value.code == 2
    assert "--windows [2048, -1]: allowed: ints >= 1" in capsys.readouterr().err


def test_decode_bench_times_a_tree_with_a_chain_length_of_its_own(monkeypatch, capsys):
    """--trees 1-1-1-1+16 (thirty-sixth session: a small tree beside a shorter chain, the CPU's fast decoder) is the
    shipped draft with that tree and a 16-token chain; a tree alone keeps the draft config's chain. A spec that is
    not widths joined by '-' (and a chain after '+') is refused before any model loads."""
    import argparse

    bench = load_script("benchmarks/decode_bench.py")
    variants = bench.variant_methods(argparse.Namespace(lookups=[], windows=[], chains=[], trees=["1-1-1-1+16", "2-2"],
                                                        rounds_only=False, rerank_leaves=False))
    assert variants == {
        "longspec_tree_1-1-1-1+16": {"assistant_model": True, "longspec_tree_widths": [1, 1, 1, 1],
                                     "longspec_lookup_tokens": 16},
        "longspec_tree_2-2": {"assistant_model": True, "longspec_tree_widths": [2, 2]}}
    for bad in ("2-x", "2-2+", "+16", "0-2"):
        monkeypatch.setattr("sys.argv", ["decode_bench.py", "--out", "/tmp/unused", "--trees", bad])
        with pytest.raises(SystemExit) as refused:
            bench.main()
        assert refused.value.code == 2
        assert f"--trees {bad!r}: allowed: widths >= 1 joined by '-', and a chain length after '+'" in \
            capsys.readouterr().err


def test_decode_bench_times_another_draft_as_a_method_of_its_own(monkeypatch, capsys):
    """benchmarks/decode_bench.py --drafts NAME=FOLDER (twenty-seventh session: a new shipped draft beside the
    one before it, in one run): a method's assistant_model picks its draft (True: the shipped one, a name: that
    folder's), and its record's stats are that draft's; a spec that is not NAME=FOLDER of a saved draft is
    refused before any model loads, naming what is allowed."""
    bench = load_script("benchmarks/decode_bench.py")
    target, shipped = perturbed_pair(widths=(2, 2))
    other = LongSpecDraftModel.from_target(target, sliding_window=16, tree_widths=[3, 3, 3])
    eager = {"longspec_cuda_graphs": False, "longspec_compile": False}
    monkeypatch.setitem(bench.METHODS, "longspec_eager", {"assistant_model": True, **eager})
    monkeypatch.setitem(bench.METHODS, "longspec_draft_other", {"assistant_model": "other", **eager})
    drafts = {True: shipped, "other": other}
    ids = random_prompt()
    reference = bench.run(target, drafts, "vanilla_dynamic", ids, 12)["tokens"]
    for method, used, unused in (("longspec_draft_other", other, shipped), ("longspec_eager", shipped, other)):
        unused_stats = unused.last_stats
        record = bench.run(target, drafts, method, ids, 12)
        assert record["tokens"] == reference  # float32: exact either way
        assert record["stats"] == used.last_stats.as_dict() and unused.last_stats is unused_stats
    assert other.last_stats.drafted_nodes != shipped.last_stats.drafted_nodes  # two tree shapes really ran

    for spec in ("before", "=/tmp", "before=/nonexistent/draft"):
        monkeypatch.setattr("sys.argv", ["decode_bench.py", "--out", "/tmp/unused", "--drafts", spec])
        with pytest.raises(SystemExit) as refused:
            bench.main()
        assert refused.value.code == 2
        assert f"--drafts {spec!r}: give NAME=FOLDER, FOLDER a saved draft (with config.json)" in capsys.readouterr().err


def test_cpu_prefix_attention_quick(tmp_path, capsys):
    """benchmarks/cpu_prefix_attention.py: the varlen op's CPU path timed against the math per (keys, rows), each
    cell checked first, a JSON and a table."""
    script = load_script("benchmarks/cpu_prefix_attention.py")
    result = script.main(["--out", str(tmp_path), "--contexts", "96", "--rows", "1", "5", "--repeats", "1"])
    assert [(c["context"], c["rows"]) for c in result["cells"]] == [(96, 1), (96, 5)]
    assert all(c["max_abs_difference"] < 1e-4 and c["fused_ms"] > 0 for c in result["cells"])
    assert json.loads((tmp_path / "cpu_prefix_attention.json").read_text())["cells"] == result["cells"]
    assert "| 96 | 5 |" in capsys.readouterr().out
