"""``longspec_generate``: a thin loop over ``LongSpecDecoder`` rounds, emitting tokens as generate() does.

    prefill (stock forward into generate's cache) -> first token -> load the decoder's buffers
    -> repeat: one round (a graph replay on CUDA) -> one sync -> emit its tokens, check stopping
    -> crop to what was emitted and hand the cache back.
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
import time

import torch

from ..attention import use_hybrid_attention
from ..generate_inputs import with_stop_strings
from ..target_support import cache_argument_name, cache_from_model_kwargs
from .acceptance import PathVerifier, first_child_flags
from .checks import (asked, check_lookup, check_request, cross_attention_window_for, lookup_chains_for, plain_steps_for,
                     rerank_leaves_for)
from .compile_policy import COMPILE_AUTO, CompileRental, check_compile_option
from .decoder import LongSpecDecoder, bucketed_capacity
from .draft_tree import TreeLayout
from .plain_steps import SAMPLED_ROUND_COST_STEPS, PlainStepPolicy
from .stats import LongSpecStats
from .roofline import latency_bound
from .sampled_accept import DeviceWarpers
from .tree_budget import lookup_within, node_budget, tree_within

_POOL_LOCK = threading.Lock()


class _Emitter:
    """Appends tokens to a preallocated sequence, applying stopping criteria and the streamer as
    generate() does. MaxLength and EOS criteria are checked on the host; others are called."""

    def __init__(self, input_ids, max_length: int, stopping_criteria, streamer, keep_scores: bool):
        from transformers.generation.stopping_criteria import EosTokenCriteria, MaxLengthCriteria

        self.ids = input_ids.new_zeros(input_ids.shape[0], max(max_length, input_ids.shape[1]))
        self.ids[:, : input_ids.shape[1]] = input_ids
        self.length = input_ids.shape[1]
        self.streamer = streamer
        self.scores, self.logits = ([], []) if keep_scores else (None, None)
        self.finished = False
        self.max_length, self.eos, self.other = None, set(), []
        for criterion in stopping_criteria or []:
            if isinstance(criterion, MaxLengthCriteria):
                self.max_length = min(self.max_length or criterion.max_length, criterion.max_length)
            elif isinstance(criterion, EosTokenCriteria):
                self.eos.update(int(t) for t in criterion.eos_token_id.flatten().tolist())
            else:
                self.other.append(criterion)

    @property
    def sequence(self) -> torch.Tensor:
        return self.ids[:, : self.length]

    def emit(self, tokens: list[int], scores=None, logits=None) -> int:
        """Emit tokens one by one until a stopping criterion fires; returns how many were emitted."""
        for i, token in enumerate(tokens):
            self.ids[0, self.length] = token
            self.length += 1
            if self.scores is not None:
                self.scores.append(scores[i])
                self.logits.append(logits[i])
            if self.streamer is not None:
                self.streamer.put(torch.tensor([token]))
            self.finished = (
                (self.max_length is not None and self.length >= self.max_length)
                or token in self.eos
                or any(bool(c(self.sequence, scores[i] if scores else None).all()) for c in self.other)
            )
            if self.finished:
                return i + 1
        return len(tokens)


# Idle decoders kept per draft for reuse (each holds a preallocated target cache and its graphs). More
# shapes than this, least recently used first, are dropped: a server seeing many prompt-length buckets or
# batch sizes must not keep one full cache per shape forever (transformers keeps one static cache).
IDLE_DECODERS_KEPT = 4


def _acquire_decoder(draft, layout: TreeLayout, capacity: int, verify_mode: str, use_graphs: bool,
                     sampling: bool, compile: bool | str, batch_size: int = 1, compile_verify: bool = True,
                     warpers: DeviceWarpers | None = None, cross_attention_window: int | None = None) -> LongSpecDecoder:
    """A free decoder of this shape bucket from the draft's pool (built once, reused across calls;
    concurrent calls get separate ones). Building a new one first drops the least recently used idle
    decoders beyond ``IDLE_DECODERS_KEPT - 1``, and all idle ones if the GPU runs out of memory.
    ``compile`` "auto": built uncompiled, compiling once its rounds have paid for it (compile_policy.py)."""
    weight = draft.target.get_input_embeddings().weight
    key = (id(draft.target), weight.dtype, weight.device, layout, capacity, batch_size, verify_mode, use_graphs,
           sampling, compile, compile and compile_verify, warpers.key if warpers is not None else None,
           cross_attention_window)  # a round captured with one window must not serve another
    with _POOL_LOCK:
        pools = draft.__dict__.setdefault("_longspec_decoders", {})
        for decoder in pools.setdefault(key, []):
            if not decoder.busy:
                decoder.busy = True
                decoder.last_used = next(_USES)
                return decoder
        _drop_idle(pools, keep=IDLE_DECODERS_KEPT - 1)

    def build():
        rental = CompileRental.for_round(compile_verify) if compile == COMPILE_AUTO else None
        return LongSpecDecoder(draft, layout, capacity, batch_size=batch_size, verify_mode=verify_mode,
                               use_cuda_graphs=use_graphs, sampling=sampling, compile=compile is True,
                               compile_verify=compile_verify, warpers=warpers,
                               cross_attention_window=cross_attention_window, rental=rental)

    try:
        decoder = build()
    except torch.OutOfMemoryError:
        with _POOL_LOCK:
            _drop_idle(pools, keep=0)
        torch.cuda.empty_cache()
        decoder = build()
    decoder.busy = True
    decoder.last_used = next(_USES)
    with _POOL_LOCK:
        pools.setdefault(key, []).append(decoder)
    return decoder


_USES = itertools.count()


def _drop_idle(pools: dict, keep: int) -> None:
    """Drop idle decoders, least recently used first, until at most ``keep`` remain (caller holds the lock)."""
    idle = sorted((d for pool in pools.values() for d in pool if not d.busy), key=lambda d: d.last_used)
    for decoder in idle[: max(0, len(idle) - keep)]:
        for key, pool in list(pools.items()):
            if decoder in pool:
                pool.remove(decoder)
                if not pool:
                    del pools[key]
        _free_graph(decoder)


def _free_graph(decoder: LongSpecDecoder) -> None:
    if decoder._graph is not None:
        decoder._graph.reset()
        decoder._graph = None


def release_decoders(draft) -> int:
    """Free the preallocated buffers and captured graphs that generate() kept on ``draft`` for reuse
    (they are otherwise freed with the draft); returns how many decoders were dropped.

    Call it before ``torch.distributed.destroy_process_group()`` with a tensor-parallel target: a live
    CUDA graph that captured NCCL collectives makes that call hang (pytorch/pytorch#115388)."""
    with _POOL_LOCK:
        pools = draft.__dict__.pop("_longspec_decoders", {})
    for decoder in (d for pool in pools.values() for d in pool):
        _free_graph(decoder)
    return sum(len(pool) for pool in pools.values())


def longspec_generate(
    model,
    input_ids: torch.LongTensor,
    logits_processor,
    stopping_criteria,
    generation_config,
    synced_gpus: bool = False,
    longspec_draft=None,
    longspec_streamer=None,
    longspec_tree_widths=None,
    longspec_max_nodes=None,
    longspec_lookup_tokens: int | None = None,
    longspec_lookup_chains: int | None = None,
    longspec_rerank_leaves: bool | None = None,
    longspec_cross_attention_window: int | None = None,
    longspec_plain_steps: bool | None = None,
    longspec_verify_attention: str = "hybrid",
    longspec_cuda_graphs: bool = True,
    longspec_compile: bool | str | None = None,
    longspec_stop_strings=None,
    longspec_tokenizer=None,
    longspec_return_cache: bool = True,
    **model_kwargs,
):
    """Lossless LongSpec tree speculation; a `custom_generate` callable for transformers' generate().

    longspec_lookup_tokens: K > 0 adds a chain of K prompt-lookup tokens (copied from the committed text,
        generation/lookup.py) beside the draft's tree (K may exceed the tree's depth, up to 32); 0: the
        draft's tree alone. None (the default): the generation config's ``longspec_lookup_tokens`` if set,
        else the draft config's ``lookup_tokens`` (on a CPU its ``cpu_lookup_tokens`` where set) cut to the
        node budget the tree leaves, greedy or sampled (sampled calls verified none until the forty-eighth
        session: their walk beside a chain now compiles whole, and the chain paid on an H100).
    longspec_rerank_leaves: True makes the tree's last width the best children of every node the draft runs
        (EAGLE-2's re-ranking of the leaves; the same nodes drafted and rows verified); False: of the last
        depth's nodes (the paper's tree). None (the default): the generation config's, else the draft config's
        ``tree_rerank_leaves`` (on a CPU its ``cpu_tree_rerank_leaves`` where set). Proposals change, the output
        does not.
    longspec_lookup_chains: 2 verifies a second chain of the same length beside the first (greedy only): the
        continuation of the latest match whose next token differs from the first chain's. Default 1.
    longspec_cross_attention_window: W > 0: the draft's cross-attention reads the target cache's
        ``num_anchor_tokens`` first entries and its newest W (as it trained on W-token sequences); 0: every
        committed entry (the method). None (the default): the generation config's, else the draft config's
        ``cross_attention_window``. Proposals change, the output does not.
    longspec_plain_steps: True lets the call take plain one-token steps (no drafting, the target's forward over
        one token) while they deliver more tokens per second than rounds, with a round now and then to see
        whether the draft hits again (plain_steps.py); False: rounds only. None (the default): the generation
        config's, else, on a CPU (where a round at 8k costs 2-4 plain steps), the draft config's
        ``cpu_plain_steps``; off on other devices. The output does not change; ``draft.last_stats.plain_steps``
        counts them. A sampled call prices a round at a fixed number of plain steps instead of timing it, so that
        its tokens depend on the seed, not on the machine's speed.
    longspec_cuda_graphs: replay each greedy round as one captured CUDA graph (CUDA only).
    longspec_compile: torch.compile the round's drafting and verification forward. Default: on CUDA, for
        a target on one device, the drafting always and the verification where launch latency, not
        bytes, bounds it (SmolLM2; not the Llama-3.1-8B shape, where compiled it ran slower). "auto": the
        same, but only once the rounds run uncompiled have lost what compiling costs (compile_policy.py):
        a short call never waits for the compiler, a long run compiles on the way, the output unchanged
        (but the round that compiles stalls its call: 34-65 s on a cold H200, so it is not the default; and a
        seeded sampled call draws other tokens in the call that switches, the compiled walk's random numbers
        being its own).
    longspec_return_cache: write the committed KV back into generate's cache at the end (always done with
        return_dict_in_generate). The routing generate() passes True only when the caller handed in a
        cache: otherwise nobody reads it, and writing it would hold every row's KV twice at the end.
    """
    from ..errors import UnsupportedGenerationError

    draft = longspec_draft
    if synced_gpus:
        raise UnsupportedGenerationError("synced_gpus is not supported with LongSpec speculation.")
    check_request(model, draft, input_ids, generation_config, model_kwargs, longspec_verify_attention,
                  longspec_tree_widths, longspec_max_nodes, logits_processor, longspec_streamer)
    check_compile_option(longspec_compile, tensor_parallel=draft._head_shard is not None)
    if not isinstance(longspec_cuda_graphs, bool):
        raise UnsupportedGenerationError(f"longspec_cuda_graphs={longspec_cuda_graphs!r}; allowed: True or False "
                                         "(replay each device round as one captured CUDA graph, on CUDA).")
    stopping_criteria = with_stop_strings(stopping_criteria, longspec_stop_strings, longspec_tokenizer)
    use_hybrid_attention(model)  # a no-op unless the user changed the implementation after binding
    widths = longspec_tree_widths or getattr(generation_config, "longspec_tree_widths", None)
    max_nodes = longspec_max_nodes or getattr(generation_config, "longspec_max_nodes", None) or \
        node_budget(draft.config, model, input_ids.shape[0], generation_config.max_length)
    if draft._head_shard is not None:  # every rank must draft the same tree
        max_nodes = draft._head_shard.smallest(max_nodes, input_ids.device)
    # the draft's own tree, or its ladder's under a tighter budget, or on a CPU the config's CPU tree; trees the
    # caller names are cut to it depth-first (a layout always drafts a node: widths and max_nodes are checked >= 1)
    on_cpu = input_ids.device.type == "cpu"
    layout = TreeLayout.plan(widths, max_nodes, draft.config.vocab_size) if widths else \
        tree_within(draft.config, max_nodes, draft.config.vocab_size, on_cpu)
    rerank_leaves = rerank_leaves_for(draft, generation_config, longspec_rerank_leaves, on_cpu)
    layout = dataclasses.replace(layout, rerank_leaves=rerank_leaves)
    do_sample = bool(generation_config.do_sample)
    keep_scores = bool(generation_config.return_dict_in_generate and (generation_config.output_scores or generation_config.output_logits))
    processors = logits_processor if logits_processor is not None and len(logits_processor) > 0 else None
    # sampling with row-wise warpers only (temperature, top-k, top-p, min-p) runs on the device, as greedy
    # does; other processors and returned scores walk the tree on the host
    warpers = DeviceWarpers.from_processors(processors) if do_sample and not keep_scores else None
    on_host = warpers is None and (do_sample or processors is not None or keep_scores)
    chains = lookup_chains_for(generation_config, longspec_lookup_chains, do_sample)
    lookup_tokens, _ = asked(generation_config, "longspec_lookup_tokens", longspec_lookup_tokens)
    if lookup_tokens is not None:  # asked for: kept as given, or refused
        check_lookup(lookup_tokens)
    else:  # the default: the draft config's (what the node budget leaves, shared by the chains)
        lookup_tokens = lookup_within(draft.config, max_nodes, layout, chains=chains, on_cpu=on_cpu)
    layout = layout.with_lookup(lookup_tokens, chains)
    window = cross_attention_window_for(draft, generation_config, longspec_cross_attention_window)
    plain_steps = plain_steps_for(draft, generation_config, longspec_plain_steps, on_cpu, on_host)

    cache = cache_from_model_kwargs(model_kwargs)
    batch = input_ids.shape[0]
    stats = LongSpecStats(prompt_tokens=input_ids.shape[1], cross_attention_window=window, tree_widths=layout.widths,
                          rerank_leaves=layout.rerank_leaves, lookup_tokens=layout.lookup, plain_steps_allowed=plain_steps)
    draft.last_stats = stats
    streamer = longspec_streamer
    if streamer is not None:
        streamer.put(input_ids.cpu())
    emitters = [_Emitter(input_ids[row : row + 1], generation_config.max_length, stopping_criteria, streamer,
                         keep_scores) for row in range(batch)]
    attention_mask = model_kwargs.get("attention_mask")
    if attention_mask is not None and bool((attention_mask == 1).all()):
        attention_mask = None  # nothing padded: every row's positions are 0..L-1

    if do_sample and draft._head_shard is not None:
        draft._head_shard.share_random_state(input_ids.device)
    cached = int(cache.get_seq_length())
    # An empty cache (the usual call): the prompt is prefilled straight into the decoder's preallocated
    # cache, so every row's KV exists once. A cache holding a prefix is prefilled, then copied in.
    decoder = _decoder_for(draft, layout, generation_config, longspec_verify_attention, longspec_cuda_graphs,
                           do_sample, on_host, longspec_compile, input_ids, warpers, window) if cached == 0 else None
    export_cache = cache if (longspec_return_cache or generation_config.return_dict_in_generate) else None
    try:
        with torch.no_grad():
            if attention_mask is None:
                positions = torch.arange(cached, input_ids.shape[1], device=input_ids.device)[None].expand(batch, -1)
                padding = {}
            else:  # left padding: positions count real tokens only, as generate() computes them
                positions = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)[:, cached:]
                padding = {"attention_mask": attention_mask}
            prefill_cache = decoder.cache.prompt_cache() if decoder is not None else cache
            out = model(input_ids=input_ids[:, cached:], position_ids=positions, logits_to_keep=1, **padding,
                        **{cache_argument_name(model): prefill_cache, "use_cache": True})
            del prefill_cache
            logits = out.logits[:, -1].to(dtype=torch.float32)
            del out
            scores = processors(input_ids, logits) if processors is not None else logits
            first = torch.multinomial(torch.softmax(scores, -1), 1)[:, 0] if do_sample else scores.argmax(-1)
            for row, emitter in enumerate(emitters):
                emitter.emit([int(first[row])], [scores[row : row + 1]], [logits[row : row + 1]])

        if all(e.finished for e in emitters):
            if decoder is not None and export_cache is not None:  # the prompt's KV is in the decoder: hand it back
                _hand_back_prompt(decoder, input_ids, attention_mask, export_cache)
        else:
            prefilled_here = decoder is not None
            if decoder is None:
                decoder = _decoder_for(draft, layout, generation_config, longspec_verify_attention, longspec_cuda_graphs,
                                       do_sample, on_host, longspec_compile, input_ids, warpers, window)
            _speculate(decoder, input_ids, attention_mask, None if prefilled_here else cache, export_cache, first,
                       emitters, stats, on_host, processors, do_sample, keep_scores,
                       _plain_step_policy(do_sample) if plain_steps else None)
    finally:
        if decoder is not None:
            decoder.busy = False

    sequence = _right_padded([e.sequence for e in emitters], generation_config)
    # vanilla appends int64 tokens to the prompt, so an int32 prompt comes back int64: so does this one
    sequence = sequence.to(torch.promote_types(sequence.dtype, torch.long))
    stats.new_tokens = sequence.shape[1] - input_ids.shape[1]
    if streamer is not None:
        streamer.end()
    if not generation_config.return_dict_in_generate:
        return sequence
    return _generate_output(sequence, emitters[0], generation_config, cache)


def _decoder_for(draft, layout, generation_config, verify_attention, cuda_graphs, do_sample, on_host, compile_option,
                 input_ids, warpers: DeviceWarpers | None = None, window: int | None = None) -> LongSpecDecoder:
    capacity = bucketed_capacity(generation_config.max_length, layout)
    # compiled by default on CUDA, except for a tensor-parallel target: there every rank must issue the
    # same collectives, and a compile failure (eager fallback) on one rank alone would break that
    default_compile = input_ids.device.type == "cuda" and draft._head_shard is None
    # True, False or "auto" (checked); host-walked rounds run eagerly
    compile_round = False if on_host else default_compile if compile_option is None else compile_option
    # by default the verification is compiled only where launch latency binds it (SmolLM2: fused
    # small kernels pay); a target bound by its bytes keeps cuBLAS GEMMs (roofline.latency_bound)
    compile_verify = compile_option if isinstance(compile_option, bool) else \
        latency_bound(draft.target, generation_config.max_length, input_ids.shape[0])
    return _acquire_decoder(draft, layout, capacity, verify_attention, cuda_graphs, do_sample, compile_round,
                            input_ids.shape[0], bool(compile_verify), warpers, window)


def _hand_back_prompt(decoder: LongSpecDecoder, input_ids, attention_mask, destination) -> None:
    """Every row stopped at its first token: the cache handed back holds just the prompts."""
    length = input_ids.shape[1]
    starts = [0] * input_ids.shape[0] if attention_mask is None else \
        (length - attention_mask.long().sum(dim=1)).tolist()
    decoder.cache.adopt_prompt(length, starts)
    decoder.finish([length - start for start in starts], destination, starts)


def _right_padded(sequences: list[torch.Tensor], generation_config) -> torch.Tensor:
    """Rows that stopped early are filled with the pad token, as generate() fills finished rows."""
    longest = max(s.shape[1] for s in sequences)
    if all(s.shape[1] == longest for s in sequences):
        return torch.cat(sequences).clone()
    pad = generation_config.pad_token_id
    if pad is None:
        eos = generation_config.eos_token_id
        pad = (eos[0] if isinstance(eos, (list, tuple)) else eos) if eos is not None else 0
    out = sequences[0].new_full((len(sequences), longest), int(pad))
    for row, s in enumerate(sequences):
        out[row, : s.shape[1]] = s[0]
    return out


def _speculate(decoder: LongSpecDecoder, input_ids, attention_mask, prefill_cache, export_cache, first,
               emitters: list[_Emitter], stats: LongSpecStats, on_host: bool, processors, do_sample: bool,
               keep_scores: bool, policy: PlainStepPolicy | None = None) -> None:
    """Rounds until every row stops. ``prefill_cache`` None: the prompt is already in the decoder's cache.
    ``export_cache``: the cache to hand the committed KV back in (None: nobody reads it). ``policy``: when to
    take a plain step instead of a round (device rounds only)."""
    # a row never holds more tokens than its emitter's buffer (generate's max_length, prompt included)
    decoder.start(input_ids, prefill_cache, first, attention_mask, max_length=emitters[0].ids.shape[1])
    drafter = decoder.host_drafter(processors, do_sample) if on_host else None
    verifier = PathVerifier(processors, do_sample, keep_scores) if on_host else None
    had_graph, had_warm_up = decoder._graph is not None, decoder.warmup_seconds is not None
    ran_compiled = decoder.compiled and had_warm_up  # compiled code warmed up (built) before this call
    drafted = decoder.layout.num_nodes - 1
    padding = [input_ids.shape[1] - int(m.sum()) for m in attention_mask] if attention_mask is not None else None
    active = [not e.finished for e in emitters]
    if not all(active):
        decoder.set_active(active)
    try:
        while any(active):
            if on_host:
                paths = decoder.round_on_host(drafter, verifier, [e.sequence for e in emitters], active)
                rows = [(row, path.tokens, *_host_path_kinds(decoder, path.accepted_nodes, row), path.scores, path.logits)
                        for row, path in enumerate(paths) if path is not None]
            else:
                plain, rows = _device_step(decoder, policy, active)
                if plain:  # its tokens are the target's own, but no round's: not in tau
                    for row, tokens, *_ in rows:
                        emitters[row].emit(tokens)
                        stats.plain_steps += 1
                    rows = []
            for row, tokens, non_chain, lookup, scores, logits in rows:
                emitted = emitters[row].emit(tokens, scores or None, logits or None)
                stats.rounds += 1
                stats.drafted_nodes += drafted
                stats.emitted_tokens += emitted
                stats.accepted_lengths[emitted] += 1
                stats.round_lengths.setdefault(row, []).append(emitted)
                stats.non_chain_commits += int(bool(non_chain))
                stats.lookup_commits += lookup
            running = [not e.finished for e in emitters]
            if running != active:
                active = running
                decoder.set_active(active)
    finally:
        # everything before a row's last emitted token is committed; the last one is not (it is a root)
        decoder.finish([e.length - 1 - (padding[row] if padding else 0) for row, e in enumerate(emitters)], export_cache,
                       padding)
    stats.cuda_graphs = decoder._graph is not None
    stats.host_walked = on_host
    # longspec_compile="auto" may switch after a call's last round: its compiled code is built by the next round
    stats.compiled = decoder.compiled and decoder.warmup_seconds is not None
    stats.verify_compiled = stats.compiled and decoder.verify_compiled
    stats.compiled_during_call = stats.compiled and not ran_compiled
    if decoder._graph is not None and not had_graph:
        stats.capture_seconds = decoder.capture_seconds
    if not had_warm_up or stats.compiled_during_call:
        stats.warmup_seconds = decoder.warmup_seconds


def _plain_step_policy(sampled: bool) -> PlainStepPolicy:
    """Timed for greedy calls (the output is the same whatever it picks); priced for sampled ones, whose tokens
    would otherwise depend on the machine's speed as well as on the seed (plain_steps.py)."""
    return PlainStepPolicy(round_cost_steps=SAMPLED_ROUND_COST_STEPS if sampled else None)


def _device_step(decoder: LongSpecDecoder, policy: PlainStepPolicy | None, active: list[bool]) -> tuple[bool, list]:
    """A device round, or a plain step where the policy takes one: (plain, the active rows' (row, tokens, non_chain,
    lookup chain kept, None, None)). The packed result's second column is non_chain + 2 * (lookup chain kept); a
    plain step sets its lookup bit where the chain guessed its token, which the policy reads."""
    plain = policy is not None and policy.plain_next()
    # a round that warms up or captures the decoder says nothing of the next one's time
    timed = decoder.warmup_seconds is not None and (decoder._graph is not None or not decoder.use_cuda_graphs)
    begin = time.perf_counter()
    result = (decoder.run_plain_step() if plain else decoder.run_round()).tolist()
    seconds = time.perf_counter() - begin
    rows = [(row, r[2 : 2 + r[0]], r[1] & 1, r[1] >> 1, None, None) for row, r in enumerate(result) if active[row]]
    if policy is not None:
        policy.record(plain, sum(len(row[1]) for row in rows), seconds, timed, chain_hit=any(row[3] for row in rows))
    if timed and not plain and decoder.rental is not None and decoder.rental.record(seconds):
        decoder.start_compiling()  # longspec_compile="auto": the next round compiles
    return plain, rows


def _host_path_kinds(decoder: LongSpecDecoder, accepted_nodes: list[int], row: int = 0) -> tuple[bool, bool]:
    """Host-walked rounds, as greedy_accept reports them on the device: (non_chain, lookup chain kept)."""
    layout = decoder.layout
    lookup = bool(layout.lookup) and any(node >= layout.lookup_offset for node in accepted_nodes[1:])
    first = first_child_flags(decoder.tree.parents)[row].tolist()
    return lookup or not all(first[node] for node in accepted_nodes[1:]), lookup


def _generate_output(sequence, emitter: _Emitter, generation_config, cache):
    from transformers.generation.utils import GenerateDecoderOnlyOutput

    cache_field = "cache" if "cache" in GenerateDecoderOnlyOutput.__dataclass_fields__ else "past_key_values"
    return GenerateDecoderOnlyOutput(
        sequences=sequence,
        scores=tuple(emitter.scores) if generation_config.output_scores and emitter.scores is not None else None,
        logits=tuple(emitter.logits) if generation_config.output_logits and emitter.logits is not None else None,
        **{cache_field: cache},
    )
