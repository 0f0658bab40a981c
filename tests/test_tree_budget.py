"""The node budget (generation/tree_budget.py): fewer drafted nodes where the tree attention's
arithmetic would dominate the verification (long contexts, big batches), the ladder's trees under
a budget instead of a depth-first cut, and generate() drafting the tree the budget picks, exactly."""

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from conftest import perturbed_pair, random_prompt
from hf_longspec import LongSpecDraftConfig
from hf_longspec.generation import TreeLayout, tree_budget
from hf_longspec.generation.tree_budget import context_node_budget, lookup_within, node_budget, tree_within

LLAMA_8B = dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=131072)
SMOLLM2 = dict(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
               num_key_value_heads=3, max_position_embeddings=8192, tie_word_embeddings=True)
FULL = (4, 16, 16, 16, 16)


def _shape_only(shape: dict):
    """The model's parameters without memory: the budget reads only shapes and dtypes."""
    with torch.device("meta"):
        return LlamaForCausalLM(LlamaConfig(**shape)).to(torch.bfloat16)


def test_the_tree_shrinks_where_its_attention_would_dominate_the_verification():
    """The trees the 2026-12-01 H200 round costs and held-out tau picked per context (docs/benchmarks.md,
    "Node budget", "Row tiles") for the 8B shape with 128 new tokens; SmolLM2 keeps its whole tree up to
    its 8k."""
    config = LongSpecDraftConfig()
    llama = _shape_only(LLAMA_8B)
    picked = {length: tree_within(config, node_budget(config, llama, 1, length + 128), LLAMA_8B["vocab_size"]).widths
              for length in (8192, 32768, 130560)}
    assert picked == {8192: FULL, 32768: (2, 6, 8, 8, 7), 130560: (2, 4, 4, 3, 2)}
    # counted in whole 64-row tiles of 4 query heads x tree rows: 16 rows at 128k (the share alone
    # allows 14), 32 at 32k (the share: 36, whose last 4 rows would open a second tile)
    assert context_node_budget(llama, 130688) == 15 and context_node_budget(llama, 32896) == 31
    smollm2 = _shape_only(SMOLLM2)
    for length in (1024, 4096, 8192):
        assert tree_within(config, node_budget(config, smollm2, 1, length), SMOLLM2["vocab_size"]).widths == FULL
    # every row of a batch attends its own cache: more rows, fewer nodes each
    assert context_node_budget(llama, 32768, 4) < context_node_budget(llama, 32768, 1) / 2
    assert node_budget(config, smollm2, 16, 1024) == 512 // 16  # there the per-batch cap binds


def test_a_budget_picks_the_largest_ladder_tree_not_a_depth_first_cut():
    config = LongSpecDraftConfig()
    assert TreeLayout.plan(FULL, 32, 1000).widths == (4, 16, 12)  # what a cap alone would draft
    assert tree_within(config, 32, 1000).widths == (2, 6, 8, 8, 7)
    assert tree_within(config, 30, 1000).widths == (2, 4, 4, 3, 2)
    assert tree_within(config, 68, 1000).widths == FULL and tree_within(config, None, 1000).widths == FULL
    assert tree_within(config, 5, 1000).widths == (2, 2, 1)  # below the smallest: that one, cut
    # ladder trees are never larger nor deeper than the draft's own (its training drew noise shifts up to
    # its own depth), and are tried largest first whatever their order
    small = LongSpecDraftConfig(tree_widths=[3, 3, 3], tree_ladder=[[1, 1], [2, 2, 2, 2], [2, 2, 2], [3, 3, 3, 3]])
    assert tree_within(small, 7, 1000).widths == (2, 2, 2) and tree_within(small, 5, 1000).widths == (1, 1)
    assert tree_within(small, 1, 1000).widths == (1,)
    assert tree_within(LongSpecDraftConfig(tree_ladder=None), 32, 1000).widths == (4, 16, 12)
    with pytest.raises(ValueError, match="tree_ladder must be a list of non-empty lists of positive ints"):
        LongSpecDraftConfig(tree_ladder=[[2, 1.5]])
    saved = LongSpecDraftConfig.from_dict(LongSpecDraftConfig(tree_ladder=[[2, 2]]).to_dict())
    assert saved.tree_ladder == [[2, 2]]


def test_generate_drafts_the_tree_the_budget_picks_for_its_context_and_stays_exact(monkeypatch):
    """A long call (max_length past 60 tokens here) drafts the ladder's tree, a short one the draft's own;
    trees the caller names are cut to the budget depth-first. Output equals vanilla greedy each time."""
    target, draft = perturbed_pair((4, 4, 4))
    monkeypatch.setattr(draft.config, "tree_ladder", [[2, 2, 3], [1, 2, 2]])
    monkeypatch.setattr(tree_budget, "context_node_budget", lambda model, context, batch=1: 100 if context < 60 else 8)
    ids = random_prompt(length=30)
    for new_tokens, nodes_per_round, tree in ((20, 12, (4, 4, 4)), (40, 7, (2, 2, 3))):  # not 4-4 cut
        reference = target.generate(ids, max_new_tokens=new_tokens, do_sample=False)
        out = target.generate(ids, assistant_model=draft, max_new_tokens=new_tokens, do_sample=False)
        stats = draft.last_stats
        assert torch.equal(out, reference)
        assert stats.rounds > 0 and stats.drafted_nodes == nodes_per_round * stats.rounds
        assert stats.tree_widths == tree and stats.as_dict()["tree_widths"] == list(tree)  # what ran, after the budget
    out = target.generate(ids, assistant_model=draft, max_new_tokens=40, do_sample=False, longspec_tree_widths=[3, 3, 3])
    assert torch.equal(out, reference) and draft.last_stats.drafted_nodes == 8 * draft.last_stats.rounds
    assert draft.last_stats.tree_widths == (3, 3, 2)


def test_compiled_rounds_serve_every_ladder_tree_without_hitting_the_recompile_limit(monkeypatch):
    """As contexts grow, generate() moves down the ladder: each tree is a new round shape for dynamo.
    Four trees, each at two cache-capacity buckets and visited twice, stay compiled (dynamo is told to
    fail on its recompile limit, which the decoder would report by running uncompiled) and exact.
    (aot_eager: the CPU has no inductor build of this graph; on CUDA the default backend compiles.)"""
    import torch._dynamo
    from transformers import StoppingCriteria, StoppingCriteriaList

    class StopAfter(StoppingCriteria):
        def __init__(self, length):
            self.length = length

        def __call__(self, input_ids, scores, **kwargs):
            return torch.full((input_ids.shape[0],), input_ids.shape[1] >= self.length, dtype=torch.bool)

    compile = torch.compile
    monkeypatch.setattr(torch, "compile", lambda fn, **kwargs: compile(fn, backend="aot_eager", **kwargs))
    monkeypatch.setattr(torch._dynamo.config, "fail_on_recompile_limit_hit", True)
    torch._dynamo.reset()
    target, draft = perturbed_pair((3, 3, 3), max_positions=8192)
    monkeypatch.setattr(draft.config, "tree_ladder", [[2, 2, 2], [1, 2, 2], [1, 1]])
    budgets = {1: 100, 2: 6, 3: 5, 4: 2}  # by 2048s of max_length: the draft's tree, then the ladder's
    monkeypatch.setattr(tree_budget, "context_node_budget", lambda model, context, batch=1: budgets[context // 2048 + 1])
    ids = random_prompt(length=30)
    reference = target.generate(ids, max_new_tokens=12, do_sample=False)
    stop = StoppingCriteriaList([StopAfter(ids.shape[1] + 12)])
    seen = []
    for _ in range(2):
        for tree in range(4):
            for bucket in (1, 2):  # cache capacities (tree + 1) x 2048 - 1024 and (tree + 1) x 2048
                max_length = tree * 2048 + bucket * 1024 - 64
                out = target.generate(ids, assistant_model=draft, max_new_tokens=max_length - ids.shape[1],
                                      stopping_criteria=stop, do_sample=False, longspec_compile=True)
                assert torch.equal(out, reference), (tree, bucket)
                assert draft.last_stats.compiled, (tree, bucket)
                seen.append(draft.last_stats.drafted_nodes // draft.last_stats.rounds)
    assert seen[:8] == [9, 9, 6, 6, 5, 5, 2, 2] and seen[8:] == seen[:8]
    torch._dynamo.reset()


def test_the_verification_is_compiled_by_default_only_where_launch_latency_binds_it(monkeypatch):
    """roofline.latency_bound: SmolLM2's verification is bound by its kernels' latency (compiling
    fuses them: 1.5x on the H200), the 8B shape's by its bytes (compiled it ran slower: 13.0 against
    11.2 ms at 32k). generate()'s default on CUDA follows it; an explicit longspec_compile wins."""
    from types import SimpleNamespace

    from hf_longspec.generation import loop
    from hf_longspec.generation.roofline import latency_bound

    assert latency_bound(_shape_only(SMOLLM2), 8192) and latency_bound(_shape_only(SMOLLM2), 8192, batch=16)
    assert not latency_bound(_shape_only(LLAMA_8B), 8192) and not latency_bound(_shape_only(LLAMA_8B), 1024)

    target, draft = perturbed_pair((2, 2))
    layout = TreeLayout.plan((2, 2), None, target.config.vocab_size)
    on_cuda = SimpleNamespace(device=torch.device("cuda"), shape=(1, 30))  # decides; the decoder stays on the CPU
    config = SimpleNamespace(max_length=64)

    def decoder(compile_option, bound):
        monkeypatch.setattr(loop, "latency_bound", lambda *args: bound)
        built = loop._decoder_for(draft, layout, config, "hybrid", False, False, False, compile_option, on_cuda)
        built.busy = False
        return built.compiled, built.verify_compiled

    assert decoder(None, True) == (True, True)
    assert decoder(None, False) == (True, False)  # the drafting still compiles
    assert decoder(True, False) == (True, True) and decoder(False, True) == (False, False)


def test_on_a_cpu_a_config_drafts_its_cpu_round_where_the_call_names_none(monkeypatch):
    """cpu_tree_widths and cpu_lookup_tokens: the tree and chain a call on a CPU drafts where it names none
    (every verified row costs there); a named tree or chain wins, the node budget still cuts, a sampled call
    drafts the same round, and a config without them drafts its own round. Output equals vanilla greedy each time."""
    target, draft = perturbed_pair((3, 3, 3))
    monkeypatch.setattr(draft.config, "lookup_tokens", 6)
    ids = torch.cat([random_prompt(length=20)] * 2, dim=1)  # a repeat: the chain finds matches

    def round_run(**options):
        out = target.generate(ids, assistant_model=draft, max_new_tokens=24, do_sample=False, **options)
        assert torch.equal(out, reference), options
        return draft.last_stats.tree_widths, draft.last_stats.lookup_tokens

    reference = target.generate(ids, max_new_tokens=24, do_sample=False)
    assert round_run() == ((3, 3, 3), 6)  # a config without a CPU round
    monkeypatch.setattr(draft.config, "cpu_tree_widths", [1, 1])
    monkeypatch.setattr(draft.config, "cpu_lookup_tokens", 4)
    assert round_run() == ((1, 1), 4)
    assert round_run(longspec_tree_widths=[2, 2]) == ((2, 2), 4)
    assert round_run(longspec_lookup_tokens=2) == ((1, 1), 2)
    assert round_run(longspec_max_nodes=3) == ((1, 1), 1)  # the budget leaves the chain one node
    assert round_run(longspec_max_nodes=1) == ((1,), 0)
    monkeypatch.setattr(draft.config, "cpu_lookup_tokens", None)
    assert round_run() == ((1, 1), 6)  # the chain of the config's GPU round
    torch.manual_seed(0)
    target.generate(ids, assistant_model=draft, max_new_tokens=4, do_sample=True)
    assert (draft.last_stats.tree_widths, draft.last_stats.lookup_tokens) == ((1, 1), 6)
    # elsewhere (a GPU) the config's own round, as before
    config = LongSpecDraftConfig(cpu_tree_widths=[1, 1, 1, 1], cpu_lookup_tokens=16, lookup_tokens=32)
    own, small = tree_within(config, None, 1000), tree_within(config, None, 1000, on_cpu=True)
    assert own.widths == FULL and small.widths == (1, 1, 1, 1)
    assert lookup_within(config, 200, own) == 32 and lookup_within(config, 200, small, on_cpu=True) == 16


def test_a_cpu_round_is_checked_and_saved_with_the_config():
    for bad, message in (({"cpu_tree_widths": []}, "cpu_tree_widths must be None"),
                         ({"cpu_tree_widths": [1, 0]}, "cpu_tree_widths must be None"),
                         ({"cpu_tree_widths": [True]}, "cpu_tree_widths must be None"),
                         ({"cpu_lookup_tokens": 33}, "cpu_lookup_tokens must be None .* from 0 to 32"),
                         ({"cpu_lookup_tokens": -1}, "cpu_lookup_tokens must be None")):
        with pytest.raises(ValueError, match=message):
            LongSpecDraftConfig(**bad)
    saved = LongSpecDraftConfig.from_dict(LongSpecDraftConfig(cpu_tree_widths=(1, 2), cpu_lookup_tokens=0).to_dict())
    assert saved.cpu_tree_widths == [1, 2] and saved.cpu_lookup_tokens == 0
    assert LongSpecDraftConfig().cpu_tree_widths is None and LongSpecDraftConfig().cpu_lookup_tokens is None
