"""GPU check of the captured round: exactness with CUDA graphs on and off, capture time, round time.

    PYTHONPATH=src python benchmarks/gpu_round_check.py [--dtypes float32 bfloat16] [--ranks 0 1] [--cross-attention-window W]
        [--rerank-leaves]

A tiny random Llama on CUDA (float32 and bf16) with a steered draft: the real draft runs, and the
target's own next token is put at rank `rank` of its logits (a perfect chain at rank 0, non-chain
accepted paths at rank 1), so commits carry several tokens and gathers really move K/V. With
--rerank-leaves every call re-ranks the tree's leaves, and a third case (tree 1-2-2-3, ranks 0 1 0 2 0 0 by
position) accepts leaves that hang above the last depth.
"""

import argparse
import sys
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from hf_longspec.kernels import prefix_attn_splitkv
from hf_longspec.testing import SteeredDraft
from hf_longspec.attention.math_attention import grouped_attention_math


def tiny_llama(dtype):
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=512, hidden_size=256, intermediate_size=512, num_hidden_layers=4,
                         num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=4096,
                         initializer_range=0.2)
    model = LlamaForCausalLM._from_config(config, dtype=dtype).to("cuda").eval()  # no cast: RoPE stays float32
    model.generation_config.eos_token_id = None
    return model


def check_kernel():
    torch.manual_seed(0)
    q = torch.randn(2, 9, 69, 64, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(2, 3, 5000, 64, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    lengths = torch.tensor([4321, 17], device="cuda")
    out, lse = prefix_attn_splitkv(q, k, v, 0.125, seqlens=lengths)
    for b in range(2):
        n = int(lengths[b])
        ref_out, ref_lse = grouped_attention_math(q[b:b + 1], k[b:b + 1, :, :n], v[b:b + 1, :, :n], 0.125)
        print(f"kernel seqlens row {b} len {n}: max |out| err {(out[b:b+1] - ref_out.flatten(1, 2)).abs().max():.2e} "
              f"lse err {(lse[b:b+1] - ref_lse.flatten(1, 2)).abs().max():.2e}")
    anchors, newest = 4, 2048  # a draft's cross_attention_window: the first 4 keys and the newest 2048 of each row
    out, lse = prefix_attn_splitkv(q, k, v, 0.125, seqlens=lengths, window=(anchors, newest))
    for b in range(2):
        n = int(lengths[b])
        keep = torch.cat([torch.arange(min(n, anchors)), torch.arange(max(anchors, n - newest), n)]).cuda()
        ref_out, ref_lse = grouped_attention_math(q[b:b + 1], k[b:b + 1, :, keep], v[b:b + 1, :, keep], 0.125)
        print(f"kernel window {(anchors, newest)} row {b} len {n}: max |out| err "
              f"{(out[b:b+1] - ref_out.flatten(1, 2)).abs().max():.2e} lse err {(lse[b:b+1] - ref_lse.flatten(1, 2)).abs().max():.2e}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtypes", nargs="+", choices=["float32", "bfloat16"], default=["float32", "bfloat16"])
    parser.add_argument("--ranks", nargs="+", type=int, choices=[0, 1], default=[0, 1],
                        help="0: the chain tree, the target's token first; 1: the full tree, non-chain paths")
    parser.add_argument("--cross-attention-window", type=int, default=None, metavar="W",
                        help="the draft reads the anchors and the newest W target entries (its captured rounds too)")
    parser.add_argument("--rerank-leaves", action="store_true", help="longspec_rerank_leaves=True, and a third case")
    args = parser.parse_args(argv)
    check_kernel()
    failures = 0
    for dtype in (getattr(torch, name) for name in args.dtypes):
        target = tiny_llama(dtype)
        ids = torch.randint(0, 512, (1, 1500), generator=torch.Generator().manual_seed(1)).cuda()
        reference = target.generate(ids, max_new_tokens=96, do_sample=False)
        cases = [([1, 1, 1, 1], (0,)), ([4, 16, 16, 16, 16], (1,))]
        cases += [([1, 2, 2, 3], (0, 1, 0, 2, 0, 0))] if args.rerank_leaves else []
        for widths, ranks in cases:
            rank = max(ranks)
            if len(ranks) == 1 and rank not in args.ranks:
                continue
            draft = SteeredDraft.from_target(target, reference, ranks=ranks, tree_widths=widths)
            draft.config.cross_attention_window = args.cross_attention_window
            for graphs in (True, False):
                for mode in ("hybrid", "masked"):
                    for call in range(2):
                        torch.cuda.synchronize()
                        start = time.perf_counter()
                        out = target.generate(ids, assistant_model=draft, max_new_tokens=96, do_sample=False,
                                              longspec_cuda_graphs=graphs, longspec_verify_attention=mode,
                                              longspec_rerank_leaves=args.rerank_leaves)
                        torch.cuda.synchronize()
                        seconds = time.perf_counter() - start
                        stats = draft.last_stats
                        same = torch.equal(out, reference)
                        failures += (not same) and dtype == torch.float32
                        print(f"{str(dtype):15s} widths={widths} ranks={ranks} graphs={graphs} {mode:6s} call{call}: "
                              f"identical={same} tau={stats.tau:.2f} non_chain={stats.non_chain_commits} "
                              f"graphs_used={stats.cuda_graphs} capture_s={stats.capture_seconds} "
                              f"{1000 * seconds / max(stats.rounds, 1):.2f} ms/round (call incl. prefill)", flush=True)
    print("FAILURES (float32 mismatches):", failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
