"""The README's main job (`hf-longspec run`) end to end on the embedded target, with the options users reach."""

import pytest

from hf_longspec import cli, demo


def test_the_main_job_takes_a_cross_attention_window_and_stays_exact(embedded, monkeypatch, capsys):
    """`hf-longspec run --cross-attention-window W` decodes with the shipped draft reading the anchors and the
    newest W target entries, says so, and its output is vanilla greedy's in float32 (the session's embedded
    target stands in for the command's own load of the same model, which takes 20 s here)."""
    monkeypatch.setattr(demo, "load_embedded_target", lambda device=None, dtype=None: embedded)
    assert cli.main(["run", "--prompt-tokens", "256", "--max-new-tokens", "12", "--kind", "prose",
                     "--cross-attention-window", "64"]) == 0
    printed = capsys.readouterr().out
    assert "draft: shipped SmolLM2 draft (reading the target's first 4 and newest 64 cache entries)" in printed
    assert "tree: 1-1-1 nodes per depth, and a 16-token prompt-lookup chain\n" in printed  # the draft's CPU round
    assert "plain steps (one token each, where rounds lost; not in tau):" in printed  # the config's, on a CPU
    assert "output identical to vanilla greedy: yes" in printed


def test_the_main_job_times_vanilla_with_the_static_cache(embedded, monkeypatch, capsys):
    """The main job's speed line is against the baseline of record, the fastest way a user runs vanilla
    transformers here: generate with ``cache_implementation="static"`` (eager on a CPU, where transformers does
    not compile it), and the report names it; every vanilla call it times asks for the static cache."""
    monkeypatch.setattr(demo, "load_embedded_target", lambda device=None, dtype=None: embedded)
    target, _ = embedded
    vanilla_caches = []
    generate = type(target).generate

    def recording_generate(model, *args, **kwargs):
        if kwargs.get("assistant_model") is None and kwargs.get("custom_generate") is None:  # not LongSpec's
            vanilla_caches.append(kwargs.get("cache_implementation"))
        return generate(model, *args, **kwargs)

    monkeypatch.setattr(type(target), "generate", recording_generate)
    assert cli.main(["run", "--prompt-tokens", "256", "--max-new-tokens", "12"]) == 0
    printed = capsys.readouterr().out
    assert "(static cache, eager: transformers compiles it on accelerators only)" in printed
    assert "x vanilla static" in printed and "output identical to vanilla greedy: yes" in printed
    assert vanilla_caches and set(vanilla_caches) == {"static"}, vanilla_caches


def test_the_main_job_turns_plain_steps_off(embedded, monkeypatch, capsys):
    """`hf-longspec run --no-plain-steps` reaches generate as longspec_plain_steps=False: the call runs rounds only,
    its report has no plain-step count, and its output is still vanilla greedy's."""
    monkeypatch.setattr(demo, "load_embedded_target", lambda device=None, dtype=None: embedded)
    assert cli.main(["run", "--prompt-tokens", "256", "--max-new-tokens", "12", "--no-plain-steps"]) == 0
    printed = capsys.readouterr().out
    assert "plain steps" not in printed
    assert "output identical to vanilla greedy: yes" in printed


def test_the_main_job_takes_a_tree_and_says_which_tree_it_drafted(embedded, monkeypatch, capsys):
    """`hf-longspec run --tree-widths 4 16 16 16 16 --lookup-tokens 32` (the shipped draft's GPU round, asked for
    on a CPU) reaches generate as longspec_tree_widths, the report names the tree and the chain that ran, and the
    output is vanilla greedy's (without the options the report names the draft's CPU round: the test above)."""
    monkeypatch.setattr(demo, "load_embedded_target", lambda device=None, dtype=None: embedded)
    assert cli.main(["run", "--prompt-tokens", "256", "--max-new-tokens", "12", "--tree-widths", "4", "16", "16", "16",
                     "16", "--lookup-tokens", "32"]) == 0
    printed = capsys.readouterr().out
    assert "tree: 4-16-16-16-16 nodes per depth, and a 32-token prompt-lookup chain" in printed
    assert "output identical to vanilla greedy: yes" in printed
    # --rerank-leaves (forty-third session) reaches generate as longspec_rerank_leaves=True, and the report says so
    assert cli.main(["run", "--prompt-tokens", "256", "--max-new-tokens", "12", "--tree-widths", "4", "16", "16", "16",
                     "16", "--lookup-tokens", "0", "--rerank-leaves"]) == 0
    printed = capsys.readouterr().out
    assert "tree: 4-16-16-16-16 nodes per depth, its leaves re-ranked over every drafted node\n" in printed
    assert "output identical to vanilla greedy: yes" in printed


def test_the_report_says_when_a_call_drafted_no_tree():
    """A call generate() ran without speculation (a prompt holding the pad token, routing.py) records no tree."""
    stats = {"tree_widths": [], "lookup_tokens": 0}
    report = demo.RunReport(4, 2, 0.1, 0.1, 1.0, 1.0, True, stats, "shipped SmolLM2 draft")
    assert report.tree_line() == "tree: none (the call decoded without speculation)"
    assert demo.RunReport(4, 2, 0.1, 0.1, 1.0, 1.0, True, {"tree_widths": [2, 2], "lookup_tokens": 0}, "d").tree_line() \
        == "tree: 2-2 nodes per depth"


def test_the_main_job_refuses_a_prompt_past_the_targets_positions_before_generating(embedded, monkeypatch, capsys):
    """`hf-longspec run --prompt-tokens 8100` (+ 128 new tokens) asks for more positions than SmolLM2's 8192: the
    command says which two arguments and the target's limit, exit 2, without a traceback and before any generate
    call (before, vanilla's warm-up and timed calls ran past the limit first and LongSpec's call refused last)."""
    monkeypatch.setattr(demo, "load_embedded_target", lambda device=None, dtype=None: embedded)
    target, _ = embedded

    class GenerateReached(Exception):
        pass

    def no_generate(model, *args, **kwargs):
        raise GenerateReached

    monkeypatch.setattr(type(target), "generate", no_generate)
    assert cli.main(["run", "--prompt-tokens", "8100", "--max-new-tokens", "128"]) == 2
    err = capsys.readouterr().err
    assert "--prompt-tokens 8100 + --max-new-tokens 128 = 8228 positions" in err, err
    assert "max_position_embeddings (8192)" in err and "Traceback" not in err
    with pytest.raises(GenerateReached):  # at the limit the job goes on to generate
        cli.main(["run", "--prompt-tokens", "8064", "--max-new-tokens", "128"])
