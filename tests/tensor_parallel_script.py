"""Run by tests/test_tensor_parallel.py (CPU, gloo) and benchmarks/device scripts (GPUs, NCCL), alone or
under ``torchrun --nproc_per_node N``: greedy LongSpec generate on a target loaded from ``--target``
(with ``tp_plan="auto"`` when launched by torchrun), with the draft saved in ``--draft``.

Writes ``<out>/rank<R>.json``: the vanilla greedy tokens, LongSpec's tokens with the plain draft and
with a draft steered onto the reference (non-chain paths), their round stats and the last drafted tree,
and both methods on a left-padded batch of two rows.
"""

import argparse
import faulthandler
import json
import os
import sys
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

from hf_longspec import LongSpecDraftModel
from hf_longspec.distributed_exit import exit_distributed_process
from hf_longspec.generation import release_decoders
from hf_longspec.testing import SteeredDraft


def last_tree(draft) -> list:
    """The tokens of the last drafted tree: they follow the real draft's ranking, which a wrongly
    sharded cross-attention would change even where the (lossless) output does not."""
    (decoder,) = [d for pool in draft.__dict__["_longspec_decoders"].values() for d in pool]
    return decoder.tree.tokens.tolist()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--target", required=True)
    parser.add_argument("--draft", required=True)
    parser.add_argument("--prompt", required=True, help="a .pt file holding (B, L) prompt ids")
    parser.add_argument("--out", required=True)
    parser.add_argument("--new-tokens", type=int, default=24)
    parser.add_argument("--reference", help="a .pt file holding the single-process greedy sequence (1, L+N); "
                        "default: this run's own vanilla output")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--compile", type=int, choices=(0, 1), default=None,
                        help="longspec_compile for the plain draft's call (default: generate's default)")
    parser.add_argument("--hang-dump", type=float, default=0,
                        help="after this many seconds, print every thread's stack to stderr and exit (a hung "
                        "collective then says where it hung instead of being killed silently)")
    args = parser.parse_args()
    if args.hang_dump:
        faulthandler.dump_traceback_later(args.hang_dump, exit=True)
    distributed = "RANK" in os.environ
    began = time.perf_counter()

    def progress(stage: str) -> None:
        print(f"rank {os.environ.get('RANK', 0)}: {stage} done at {time.perf_counter() - began:.1f} s",
              file=sys.stderr, flush=True)

    dtype = getattr(torch, args.dtype)
    device = f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}" if torch.cuda.is_available() else "cpu"
    load = {"tp_plan": "auto"} if distributed else {"device_map": device}
    target = AutoModelForCausalLM.from_pretrained(args.target, dtype=dtype, **load).eval()
    target.generation_config.eos_token_id = None
    prompt = torch.load(args.prompt).to(target.device)
    options = {"max_new_tokens": args.new_tokens, "do_sample": False}
    result = {"tp_size": target.tp_size or 1}
    result["vanilla"] = target.generate(prompt, **options).tolist()
    progress("vanilla")

    draft = LongSpecDraftModel.from_pretrained(args.draft, dtype=dtype).to(target.device).bind(target)
    compile_option = {} if args.compile is None else {"longspec_compile": bool(args.compile)}
    result["longspec"] = target.generate(prompt, assistant_model=draft, **options, **compile_option).tolist()
    stats = draft.last_stats
    result["longspec_stats"] = {"rounds": stats.rounds, "tau": stats.tau, "compiled": stats.compiled,
                                "cuda_graphs": stats.cuda_graphs}
    result["last_tree"] = last_tree(draft)
    result["lookup"] = target.generate(prompt, assistant_model=draft, longspec_lookup_tokens=8, **options,
                                       **compile_option).tolist()
    stats = draft.last_stats
    result["lookup_stats"] = {"rounds": stats.rounds, "tau": stats.tau, "lookup_commits": stats.lookup_commits}
    progress("longspec")
    # a left-padded batch of two rows (the prompt, and the prompt without its last 7 tokens)
    batch = torch.zeros(2, prompt.shape[1], dtype=torch.long, device=prompt.device)
    mask = torch.zeros_like(batch)
    batch[0], mask[0] = prompt[0], 1
    batch[1, 7:], mask[1, 7:] = prompt[0, :-7], 1
    batched = {"attention_mask": mask, "pad_token_id": 0, **options}
    result["vanilla_batch"] = target.generate(batch, **batched).tolist()
    result["longspec_batch"] = target.generate(batch, assistant_model=draft, **batched, **compile_option).tolist()
    progress("batch")
    reference = torch.load(args.reference) if args.reference else torch.tensor(result["vanilla"])
    for key in ("vanilla", "longspec"):  # in the log too, so a run cut off later still says what matched
        print(f"rank {os.environ.get('RANK', 0)}: {key} identical to the reference: "
              f"{result[key] == reference.tolist()}", file=sys.stderr, flush=True)
    print(f"rank {os.environ.get('RANK', 0)}: batch identical to vanilla batch: "
          f"{result['longspec_batch'] == result['vanilla_batch']}", file=sys.stderr, flush=True)
    steered = SteeredDraft.from_pretrained(args.draft, dtype=dtype).to(target.device).bind(target)
    steered.steer(reference, ranks=(0, 1, 2))
    result["steered"] = target.generate(prompt, assistant_model=steered, longspec_compile=False, **options).tolist()
    stats = steered.last_stats
    result["steered_stats"] = {"rounds": stats.rounds, "tau": stats.tau, "non_chain": stats.non_chain_commits}
    progress("steered")
    print(f"rank {os.environ.get('RANK', 0)}: steered identical to the reference: "
          f"{result['steered'] == reference.tolist()} (non-chain commits {stats.non_chain_commits})",
          file=sys.stderr, flush=True)
    # the tree's leaves re-ranked over every drafted node: leaves at several depths, on the sharded cache too
    result["steered_rerank"] = target.generate(prompt, assistant_model=steered, longspec_compile=False,
                                               longspec_rerank_leaves=True, **options).tolist()
    stats = steered.last_stats
    result["steered_rerank_stats"] = {"rounds": stats.rounds, "tau": stats.tau, "rerank": stats.rerank_leaves}
    rank = int(os.environ.get("RANK", 0))
    torch.manual_seed(100 + rank)  # ranks seeded differently on purpose: generate must agree anyway
    result["sampled"] = target.generate(prompt, assistant_model=draft, do_sample=True, top_k=20,
                                        max_new_tokens=args.new_tokens).tolist()
    result["sampled_lookup"] = target.generate(prompt, assistant_model=draft, do_sample=True, top_k=20,
                                               longspec_lookup_tokens=8, max_new_tokens=args.new_tokens).tolist()
    result["sampled_rerank"] = target.generate(prompt, assistant_model=draft, do_sample=True, top_k=20,
                                               longspec_rerank_leaves=True, max_new_tokens=args.new_tokens).tolist()
    progress("sampled")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / f"rank{rank}.json").write_text(json.dumps(result))
    if distributed:
        # graphs that captured NCCL collectives must go before the process group, or destroying it hangs
        release_decoders(draft)
        release_decoders(steered)
    progress("teardown")
    exit_distributed_process(0)  # the TP mesh's groups outlive destroy_process_group: no finalization


if __name__ == "__main__":
    main()
