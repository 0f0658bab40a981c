"""``LongSpecDecoder``: one speculation round (draft tree -> verify -> accept -> commit) on
preallocated buffers, replayed as ONE CUDA graph per round on CUDA.

Everything a round reads or writes lives in device buffers created once per shape bucket
(target cache capacity, tree widths, batch, dtype): the target's ``TreeKVCache``, the draft's ring
buffer and tree K/V, the tree itself, the root tokens and the round's packed result. A round makes
no host sync; the caller makes exactly one per round, to read the packed result (tokens to emit).

Greedy decoding without logits processors runs ``round()`` (captured as a graph on CUDA), and so
does sampling whose processors are row-wise warpers (temperature, top-k, top-p, min-p: the decoder's
``warpers``), with the tree's rejection sampling on the device (sampled_accept.py). Other
processors or returned scores need the host to walk the tree: ``round_on_host()`` runs the same
drafting, verification forward and commit eagerly, with ``PathVerifier`` in between.
"""

from __future__ import annotations

import contextlib
import time
import warnings

import torch

from ..attention import PREFIX_LENGTHS_KWARG, TREE_MASK_KWARG
from ..draft_state import DraftStepContext
from ..target_support import cache_argument_name
from .acceptance import AcceptedPaths, PathVerifier, VerifiedPath, greedy_accept
from .compile_policy import CompileRental
from .draft_tree import TreeBuffers, TreeDrafter, TreeLayout
from .lookup import PromptLookup
from .sampled_accept import DeviceWarpers, sampled_walk
from .tree_cache import TreeKVCache

CAPACITY_BUCKET = 1024  # cache capacity is rounded up to this: one graph serves many prompt lengths
VERIFY_MODES = ("hybrid", "masked")


def bucketed_capacity(max_length: int, layout: TreeLayout) -> int:
    """Cache rows needed for generation up to ``max_length`` tokens with this tree, rounded up."""
    needed = max_length + layout.num_nodes
    return -(-needed // CAPACITY_BUCKET) * CAPACITY_BUCKET


class LongSpecDecoder:
    """The public round object: owns the buffers and (on CUDA) the captured graph of one round."""

    def __init__(self, draft, layout: TreeLayout, capacity: int, batch_size: int = 1,
                 verify_mode: str = "hybrid", use_cuda_graphs: bool = True, sampling: bool = False,
                 compile: bool = False, compile_verify: bool | None = None, warpers: DeviceWarpers | None = None,
                 cross_attention_window: int | str | None = "config", rental: CompileRental | None = None):
        target = draft.target
        config = target.config.get_text_config()
        weight = target.get_input_embeddings().weight
        self.draft, self.target, self.layout = draft, target, layout
        self.device, self.dtype = weight.device, weight.dtype
        self.batch_size, self.capacity, self.verify_mode = batch_size, capacity, verify_mode
        self.use_cuda_graphs = use_cuda_graphs and self.device.type == "cuda"
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        kv_heads = config.num_key_value_heads  # per rank, for a tensor-parallel target
        if draft._head_shard is not None:
            kv_heads = draft._head_shard.local_heads(kv_heads)
        self.cache = TreeKVCache(config.num_hidden_layers, batch_size, kv_heads, head_dim,
                                 capacity, layout.num_nodes, self.dtype, self.device)
        self.warpers = warpers  # sampled device rounds (None: greedy ones); their settings are in the graph
        self.tree = TreeBuffers.allocate(layout, batch_size, self.device, draft.config.vocab_size,
                                         keep_probs=sampling or warpers is not None)
        ring = draft.new_ring_buffer(batch_size)
        draft_heads, draft_dim = draft.config.num_key_value_heads, draft.config.head_dim
        tree_kv = torch.zeros(2, batch_size, draft_heads, layout.num_run, draft_dim, dtype=ring.keys.dtype,
                              device=self.device)
        (target_keys, target_values), *extra_kv = (self.cache.layer_kv(layer) for layer in draft.target_layers)
        # the entries the draft's cross-attention reads are fixed per decoder: a captured round bakes them in
        self.context = DraftStepContext(ring, tree_kv[0], tree_kv[1], target_keys, target_values, self.cache.lengths,
                                        tuple(extra_kv), cross_attention_window)
        self.root_tokens = torch.zeros(batch_size, dtype=torch.long, device=self.device)
        self.active = torch.ones(batch_size, dtype=torch.bool, device=self.device)  # rows still generating
        # per row, the most tokens it may ever hold committed in this call (set by start): a row's last
        # round commits no more than that, so a finished row never sits past max_length, where its tree
        # (drafted and verified on in every later round of the batch) would be written beyond the cache
        self.commit_limit = torch.full((batch_size,), capacity, dtype=torch.long, device=self.device)
        self.node_steps = torch.arange(layout.num_nodes, device=self.device)[None]
        # the lookup chain's committed-token history (None without a chain: nothing changes then)
        self.lookup = PromptLookup(batch_size, capacity, layout.lookup, self.device, chains=layout.lookup_chains) \
            if layout.lookup else None
        # packed result of a round, per row: [accepted, non_chain + 2 * lookup taken, emitted tokens (P+1)]
        self.result = torch.zeros(batch_size, layout.path_length + 3, dtype=torch.long, device=self.device)
        self._cache_kwargs = {cache_argument_name(target): self.cache, "use_cache": True}
        self._graph = None
        self._greedy_drafter = TreeDrafter(draft, layout, self.tree)
        self._sampled_drafter = TreeDrafter(draft, layout, self.tree, warpers, do_sample=True) \
            if warpers is not None else None
        # torch.compile fuses the many small kernels of a decoder layer (norms, RoPE, activations);
        # the hybrid attention is an opaque custom op inside. The first (warm-up) round pays for it,
        # then graphs replay the compiled kernels. Dynamo's automatic dynamic shapes (dynamic=None):
        # the first shape compiles static; a second decoder of another size (a new prompt-length
        # bucket, batch, tree) compiles once more with the sizes that changed made dynamic, and every
        # later one reuses that. Compiled static (dynamic=False), each new bucket recompiled (35-45 s
        # on the H200), and from the ninth shape on dynamo's recompile limit left rounds uncompiled.
        # compile_verify=False compiles the drafting alone (None: as `compile`): a large target's
        # verification is bound by its GEMMs, and compiled it ran slower (8B shape, 32k, 2026-12-01:
        # 13.02 against 11.21 ms), while the one-layer draft gained (3.32 against 4.12 ms).
        # ``rental`` (longspec_compile="auto"): built uncompiled, it compiles once its rounds have paid for it
        # (compile_policy.py); ``compile_verify`` then says what it compiles.
        self.rental, self._compile_verify_asked = rental, compile_verify
        self._use_compiled(compile, compile_verify)
        # the greedy walk and the commit stay eager inside the captured round: compiled, they saved nothing (a greedy
        # round 3.68 against 3.66 ms, a sampled one 4.50 against 4.31 ms on an H100 at 8k, forty-eighth session)
        self.warmup_seconds = None  # the first round's time, compile included (None: not run yet)
        self.busy = False
        self.capture_seconds = None  # how long the first capture took (None: not captured yet)

    def _use_compiled(self, compile: bool, compile_verify: bool | None) -> None:
        """Compile the drafting and the verification (``compile_verify`` None: as the drafting), or run them eagerly."""
        self.compiled = compile
        self.verify_compiled = compile if compile_verify is None else bool(compile and compile_verify)
        self._verify = torch.compile(self._verify_forward) if self.verify_compiled else self._verify_forward
        self._draft_greedy = torch.compile(self._draft_greedy_eager) if compile else self._draft_greedy_eager
        self._draft_sampled = torch.compile(self._draft_sampled_eager) if compile else self._draft_sampled_eager
        self._sample_accept = sampled_walk(compile)  # the sampled tree walk, fused when compiling

    def start_compiling(self) -> None:
        """Compile from the next round on (its rental paid): that round warms up compiled and is captured again.
        The buffers stay, so a call goes on where it was, with the same output."""
        self.rental = None
        self._use_compiled(True, self._compile_verify_asked)
        self.warmup_seconds, self._graph = None, None

    # ------------------------------------------------------------------ setup per generate() call
    @torch.no_grad()
    def start(self, prompt_ids: torch.Tensor, prefill_cache, first_tokens: torch.Tensor,
              attention_mask: torch.Tensor | None = None, max_length: int | None = None) -> None:
        """Load the prompt's prefilled target cache and the draft's ring; ``first_tokens`` (B,) are
        the roots of the first round (emitted, not yet run through the target). With a left-padded
        ``attention_mask`` each row's real tokens are moved to the start of its buffers.
        ``max_length``: the call's generation limit (prompt width included; None: as many tokens as the
        cache holds beside a tree); no row commits past it.

        ``prefill_cache`` None: the prompt was prefilled into ``self.cache.prompt_cache()`` (its KV is
        already in place; nothing is copied)."""
        length = prompt_ids.shape[1]
        starts = [0] * prompt_ids.shape[0]
        if attention_mask is not None:
            starts = (attention_mask.shape[1] - attention_mask.long().sum(dim=1)).tolist()
        max_length = max_length if max_length is not None else self.capacity - self.layout.num_nodes + 1
        if max_length - 1 - min(starts) + self.layout.num_nodes > self.capacity:
            raise ValueError(f"generation up to {max_length} tokens and a {self.layout.num_nodes}-node tree do "
                             f"not fit the cache capacity {self.capacity}")
        # a row holds at most max_length tokens (its left padding excluded), the last one its uncommitted root
        self.commit_limit.copy_(torch.tensor([max_length - 1 - start for start in starts]))
        if prefill_cache is None:
            self.cache.adopt_prompt(length, starts)
        else:
            self.cache.load(prefill_cache, length, starts)
        self.draft.start(prompt_ids, ring=self.context.ring, starts=torch.tensor(starts, device=self.device))
        if self.lookup is not None:
            self.lookup.start(prompt_ids, starts)
        self.root_tokens.copy_(first_tokens)
        self.active.fill_(True)

    def set_active(self, rows: list[bool]) -> None:
        """Rows still generating; finished rows stop committing (their lengths freeze)."""
        self.active.copy_(torch.tensor(rows, dtype=torch.bool))

    # ------------------------------------------------------------------ the round, device only
    def _verify_forward(self, nodes: int | None = None) -> torch.Tensor:
        """One target forward over the tree's first ``nodes`` nodes (None: every node; 1: the root alone, a plain
        step); returns logits (B, nodes, V)."""
        n = self.layout.num_nodes if nodes is None else nodes
        lengths, tree = self.cache.lengths, self.tree
        ancestors = tree.ancestors[:, :n, :n]
        self.cache.write_positions[:, :n].copy_(lengths[:, None] + self.node_steps[:, :n])
        positions = lengths[:, None] + tree.depths[:, :n]
        if self.verify_mode == "hybrid":
            extra = {
                "attention_mask": ancestors[:, None],  # a 4D placeholder: transformers builds no mask
                TREE_MASK_KWARG: ancestors,
                PREFIX_LENGTHS_KWARG: lengths,
            }
        else:  # reference mode: the target's own eager/sdpa attention with a full 4D mask over the buffer
            slots = torch.arange(self.capacity, device=self.device)[None, None, :]
            offset = slots - lengths[:, None, None]  # (B, 1, C): slot's tree node id, if in the tree
            in_tree = (offset >= 0) & (offset < n)
            tree_part = ancestors.gather(2, offset.clamp(0, n - 1).expand(-1, n, -1))
            visible = (offset < 0) | (in_tree & tree_part)
            additive = torch.zeros(visible.shape, dtype=self.dtype, device=self.device)
            extra = {"attention_mask": additive.masked_fill_(~visible, torch.finfo(self.dtype).min)[:, None]}
        out = self.target(input_ids=tree.tokens[:, :n], position_ids=positions, logits_to_keep=0, **extra,
                          **self._cache_kwargs)
        return out.logits

    def _draft(self, drafter: TreeDrafter, sequences=None) -> None:
        drafter.build(self.context, self.root_tokens, self.cache.lengths, sequences)

    def _draft_greedy_eager(self) -> None:
        self._draft_with_lookup(self._greedy_drafter)

    def _draft_sampled_eager(self) -> None:
        self._draft_with_lookup(self._sampled_drafter)

    def _draft_with_lookup(self, drafter: TreeDrafter) -> None:
        self._draft(drafter)
        if self.lookup is not None:
            drafter.attach_lookup(*self.lookup.propose(self.cache.lengths, self.root_tokens))

    def _commit(self, path_nodes: torch.Tensor, accepted: torch.Tensor, roots: torch.Tensor) -> None:
        """Keep the accepted paths in the target cache and the draft ring; the bonus tokens become
        roots. Finished rows (``active`` False) keep everything as it is, and a row's last round
        commits no more than its ``commit_limit`` (it emits the rest of its path, cut by generate)."""
        accepted = torch.minimum(accepted * self.active, (self.commit_limit - self.cache.lengths).clamp(min=0))
        positions = self.cache.lengths[:, None] + torch.arange(path_nodes.shape[1], device=self.device)[None]
        valid = positions < (self.cache.lengths + accepted)[:, None]
        tokens = self.tree.tokens.gather(1, path_nodes)
        self.draft.commit(self.context.ring, tokens, positions, valid)
        if self.lookup is not None:
            self.lookup.commit(tokens, positions, valid)
        self.cache.commit(path_nodes, accepted)
        self.root_tokens.copy_(torch.where(self.active, roots, self.root_tokens))

    @torch.no_grad()
    def round(self) -> None:
        """A round with no host sync, greedy or sampled with the decoder's warpers; writes ``self.result``."""
        if self.warpers is None:
            self._draft_greedy()
            paths: AcceptedPaths = greedy_accept(self.layout, self.tree, self._verify())
        else:
            self._draft_sampled()
            paths = self._sample_accept(self.layout, self.tree, self._verify(), self.warpers)
        self._keep_paths(paths)

    def _keep_paths(self, paths: AcceptedPaths) -> None:
        """Commit a round's accepted paths and write its packed result."""
        roots = paths.emitted.gather(1, (paths.accepted - 1)[:, None])[:, 0]
        self._commit(paths.path_nodes, paths.accepted, roots)
        self.result[:, 0] = paths.accepted
        self.result[:, 1] = paths.non_chain.long() + (2 * paths.lookup.long() if paths.lookup is not None else 0)
        self.result[:, 2:] = paths.emitted

    @torch.no_grad()
    def plain_step(self) -> None:
        """One token per row without speculating, as vanilla decoding takes it: the target's forward over the
        root alone, its next token (argmax, or sampled through the decoder's warpers) the new root. The root is
        committed to the target cache, the draft's ring and the lookup history as a round commits it, so a
        round can follow at once. Writes ``self.result`` as a round whose draft proposed nothing, its second
        column 2 where the lookup chain's first token was the one taken (the chain is copying: a round would
        have taken its run at once)."""
        self.tree.tokens[:, 0] = self.root_tokens
        self.tree.ancestors[:, 0, 0] = True
        guessed = self.lookup.propose(self.cache.lengths, self.root_tokens) if self.lookup is not None else None
        logits = self._verify_forward(nodes=1)[:, 0].float()
        if self.warpers is None:
            following = logits.argmax(-1)
        else:
            following = torch.multinomial(torch.softmax(self.warpers(None, logits), -1), 1)[:, 0]
        one = torch.ones_like(self.cache.lengths)
        self._commit(torch.zeros_like(self.result[:, :1]), one, following)
        self.result[:, 0] = one
        self.result[:, 1] = 0 if guessed is None else 2 * (guessed[1][:, 0] & (guessed[0][:, 0] == following)).long()
        self.result[:, 2] = following

    def run_plain_step(self) -> torch.Tensor:
        """``plain_step`` eagerly (never captured); returns the packed result on the host, as ``run_round``."""
        self.plain_step()
        return self.result.cpu()

    def run_round(self) -> torch.Tensor:
        """One device round; on CUDA a graph replay (captured after one eager warm-up round).
        Returns the packed result on the host: the round's one sync."""
        if self.warmup_seconds is None:
            self._warm_up()
        elif not self.use_cuda_graphs:
            self.round()
        elif self._graph is None:
            self._warm_up_then_capture()
        else:
            self._graph.replay()
        return self.result.cpu()

    def _warm_up(self) -> None:
        """The first round, run eagerly (on a side stream on CUDA, as capture wants): builds the
        Triton kernels, sets up cuBLAS, compiles. If compiling fails, warn and stay eager."""
        begin = time.perf_counter()
        cuda = self.device.type == "cuda"
        stream = torch.cuda.Stream(self.device) if cuda else None
        if cuda:
            stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(stream) if cuda else contextlib.nullcontext():
            try:
                self.round()
            except Exception as error:  # noqa: BLE001 - any compiler failure: fall back, loudly
                if not self.compiled:
                    raise
                warnings.warn(f"torch.compile of the LongSpec round failed ({type(error).__name__}: {error}); "
                              "running it uncompiled (pass longspec_compile=False to skip compiling).")
                self._use_compiled(False, False)
                self.round()
        if cuda:
            torch.cuda.current_stream(self.device).wait_stream(stream)
            torch.cuda.synchronize(self.device)
        self.warmup_seconds = time.perf_counter() - begin

    def _warm_up_then_capture(self) -> None:
        """Capture the round as one CUDA graph (after the warm-up round); capture records without
        running, so the state stays consistent."""
        torch.cuda.synchronize(self.device)
        begin = time.perf_counter()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.round()
        torch.cuda.synchronize(self.device)
        self.capture_seconds = time.perf_counter() - begin
        self._graph = graph
        graph.replay()

    # ------------------------------------------------------------------ host-walked round
    @torch.no_grad()
    def round_on_host(self, drafter: TreeDrafter, verifier: PathVerifier, sequences: list[torch.Tensor],
                      active: list[bool] | None = None) -> list[VerifiedPath | None]:
        """Processors / sampling / scores: eager drafting and verification forward, then each active
        row's tree walked on the host (``sequences``: per row, (1, L_b) committed ids ending with the
        root). Returns each row's verified path (None for a finished row, which commits nothing)."""
        self._draft(drafter, sequences)
        if self.lookup is not None:
            drafter.attach_lookup(*self.lookup.propose(self.cache.lengths, self.root_tokens))
        logits = self._verify_forward()
        chain = self.layout.lookup_offset if self.layout.lookup else None
        paths, nodes, accepted, roots = [], [], [], []
        for row, sequence in enumerate(sequences):
            running = active is None or active[row]
            path = verifier.verify(self.tree.to_host(row, chain), logits[row], sequence, row, len(sequences)) \
                if running else None
            kept = path.accepted_nodes if path is not None else [0]
            paths.append(path)
            nodes.append(kept + [0] * (self.layout.path_length + 1 - len(kept)))
            accepted.append(len(kept) if path is not None else 0)
            roots.append(path.tokens[-1] if path is not None else 0)  # a finished row keeps its root (active)
        self._commit(torch.tensor(nodes, device=self.device), torch.tensor(accepted, device=self.device),
                     torch.tensor(roots, device=self.device))
        return paths

    def host_drafter(self, logits_processor, do_sample: bool) -> TreeDrafter:
        return TreeDrafter(self.draft, self.layout, self.tree, logits_processor, do_sample)

    # ------------------------------------------------------------------ end of a generate() call
    def finish(self, committed_lengths: list[int], destination_cache, padding: list[int] | None = None) -> None:
        """Crop each row to what it emitted (a stop inside an accepted path) and hand the cache back,
        each row after its left ``padding`` as in vanilla's cache."""
        self.cache.lengths.copy_(torch.tensor(committed_lengths))
        if destination_cache is not None:
            self.cache.export_to(destination_cache, committed_lengths, padding)
