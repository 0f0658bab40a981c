"""Tensor-parallel targets: greedy LongSpec on a target sharded over 2 CPU processes (gloo,
``tp_plan="auto"``) emits, on every rank, exactly the single-process vanilla tokens, with the plain
draft, with a prompt-lookup chain beside its tree, and with a draft steered onto non-chain paths (its leaves
re-ranked too).
The target is a tiny random Llama with 4 query and 2 KV heads (SmolLM2's 3 KV heads do not split
over 2 ranks) reading real local text."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import tiny_llama

SCRIPT = Path(__file__).with_name("tensor_parallel_script.py")
NEW_TOKENS = 24


def _env():
    src = str(Path(__file__).resolve().parents[1] / "src")
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}


def _run(launcher, tmp_path, name, reference=None):
    out = tmp_path / name
    args = [*launcher, str(SCRIPT), "--target", str(tmp_path / "target"), "--draft", str(tmp_path / "draft"),
            "--prompt", str(tmp_path / "prompt.pt"), "--out", str(out), "--new-tokens", str(NEW_TOKENS)]
    if reference is not None:
        args += ["--reference", str(reference)]
    # 20 s normally; ranks whose sampling draws differ run different numbers of rounds and hang
    result = subprocess.run(args, env=_env(), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    return [json.loads(path.read_text()) for path in sorted(out.glob("rank*.json"))]


@pytest.fixture(scope="module", params=[[], [0]], ids=["last_layer", "also_layer0"])
def saved_pair(tmp_path_factory, request):
    """A target and a draft reading its last layer, or also layer 0 (extra_target_layer_indices: each rank
    then computes its KV heads' share of both query blocks)."""
    from hf_longspec import LongSpecDraftModel

    folder = tmp_path_factory.mktemp("tp")
    # vocab 256: transformers 5.17 needs the LM head's rows to split evenly over the ranks
    target = tiny_llama(vocab_size=256, hidden_size=64, heads=4, kv_heads=2, layers=2, initializer_range=0.3)
    target.save_pretrained(folder / "target")
    draft = LongSpecDraftModel.from_target(target, sliding_window=16, tree_widths=[2, 3, 3],
                                           extra_target_layer_indices=request.param)
    with torch.no_grad():
        for parameter in draft.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.1)
    draft.save_pretrained(folder / "draft")
    text = Path(json.__file__).read_bytes()[:300]  # real local text (the stdlib's json package), bytes as ids
    torch.save(torch.tensor([list(text)]), folder / "prompt.pt")
    return folder


def test_two_rank_tensor_parallel_target_emits_single_process_tokens(saved_pair):
    single = _run([sys.executable], saved_pair, "single")[0]  # steered onto its own vanilla output
    reference = saved_pair / "reference.pt"
    torch.save(torch.tensor(single["vanilla"]), reference)
    assert single["tp_size"] == 1
    # with an 8-token lookup chain: this random target's output does not repeat its prompt, so the
    # chain's nodes are verified in every sharded forward and rejected (tests/test_lookup.py keeps them)
    assert single["longspec"] == single["vanilla"] == single["steered"] == single["lookup"] == single["steered_rerank"]
    assert single["longspec_batch"] == single["vanilla_batch"] and single["vanilla_batch"][0] == single["vanilla"][0]

    ranks = _run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29531"],
                 saved_pair, "tp2", reference)
    assert len(ranks) == 2 and all(rank["tp_size"] == 2 for rank in ranks)
    for rank in ranks:
        assert rank["vanilla"] == single["vanilla"]  # the sharded target itself agrees with one process
        assert rank["last_tree"] == single["last_tree"]  # the sharded draft drafts what the whole one does
        assert rank["vanilla_batch"] == single["vanilla_batch"] == rank["longspec_batch"]  # a left-padded batch
        assert rank["longspec"] == single["vanilla"]
        assert rank["lookup"] == single["vanilla"] and rank["lookup_stats"] == single["lookup_stats"]
        assert rank["steered"] == single["vanilla"]
        # steering really exercised multi-token, non-chain commits on the sharded cache
        assert rank["steered_stats"]["non_chain"] > 0 and rank["steered_stats"]["tau"] > 2.0
        # re-ranked leaves (forty-fourth session: on in the shipped config) on the sharded target, the same rounds
        assert rank["steered_rerank"] == single["vanilla"] and rank["steered_rerank_stats"] == single["steered_rerank_stats"]
        assert rank["steered_rerank_stats"]["rerank"]
    assert ranks[0]["longspec_stats"] == ranks[1]["longspec_stats"]
    # sampling: ranks seeded differently still emit one sequence (rank 0's random state is shared)
    assert ranks[0]["sampled"] == ranks[1]["sampled"] and len(ranks[0]["sampled"][0]) == len(single["vanilla"][0])
    assert ranks[0]["sampled_lookup"] == ranks[1]["sampled_lookup"]  # the same, with the chain walked on the host
    assert ranks[0]["sampled_rerank"] == ranks[1]["sampled_rerank"]  # and with re-ranked leaves
    assert ranks[0]["steered_stats"] == ranks[1]["steered_stats"]


def test_training_against_a_sharded_target_is_refused():
    """The draft's training forward reads full KV heads: a draft bound to a TP target says so."""
    from hf_longspec import LongSpecDraftModel
    from hf_longspec.errors import UnsupportedTargetError
    from hf_longspec.tensor_parallel import HeadShard

    target = tiny_llama(heads=4, kv_heads=2)
    draft = LongSpecDraftModel.from_target(target)
    draft._head_shard = HeadShard(rank=0, world_size=2, group=None)
    ids = torch.zeros(1, 8, dtype=torch.long)
    keys = torch.zeros(1, 2, 8, 16)
    with pytest.raises(UnsupportedTargetError, match="tensor-parallel"):
        draft(ids, keys, keys)


def test_head_counts_that_do_not_split_are_refused():
    from hf_longspec.errors import UnsupportedTargetError
    from hf_longspec.tensor_parallel import HeadShard, check_shardable

    target = tiny_llama(hidden_size=48, heads=6, kv_heads=3)
    with pytest.raises(UnsupportedTargetError, match="3 KV heads"):
        check_shardable(target.config, HeadShard(rank=0, world_size=2, group=None))
