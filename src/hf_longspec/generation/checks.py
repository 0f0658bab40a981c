"""Everything that can be wrong with a LongSpec generate() call, refused before any forward runs."""

from __future__ import annotations

import torch
from transformers.cache_utils import QuantizedCache
from transformers.generation.configuration_utils import GenerationMode
from transformers.generation.logits_process import (
    SynthIDTextWatermarkLogitsProcessor,
    UnbatchedClassifierFreeGuidanceLogitsProcessor,
)

from ..errors import IncompatibleDraftError, UnsupportedGenerationError
from ..target_support import cache_from_model_kwargs
from ..tree_options import check_tree_options
from .decoder import VERIFY_MODES
from .lookup import MAX_LOOKUP_CHAINS, MAX_LOOKUP_TOKENS, is_lookup_length


# set by TreeKVCache.export_to on a cache it fills: the rows whose tail holds no K/V (stopped early)
CUT_SHORT_ROWS = "_longspec_rows_cut_short"


def check_lookup(tokens) -> None:
    """``longspec_lookup_tokens``: an int in [0, MAX_LOOKUP_TOKENS]."""
    if not is_lookup_length(tokens):
        raise UnsupportedGenerationError(
            f"longspec_lookup_tokens={tokens!r}; allowed: an int from 0 to {MAX_LOOKUP_TOKENS} "
            "(0: no prompt-lookup chain).")


def asked(generation_config, name: str, requested):
    """(value, where it came from): the call's ``name`` option, else the generation config's (None: neither)."""
    if requested is None and getattr(generation_config, name, None) is not None:
        return getattr(generation_config, name), f"generation_config.{name}"
    return requested, name


def lookup_chains_for(generation_config, requested, sampled: bool) -> int:
    """``longspec_lookup_chains`` (else the generation config's, else 1): how many prompt-lookup chains a round
    verifies, 1 or 2. Sampled rounds try one chain's token against the residual; two are refused there."""
    requested, name = asked(generation_config, "longspec_lookup_chains", requested)
    if requested is None:
        return 1
    if isinstance(requested, bool) or not isinstance(requested, int) or not 1 <= requested <= MAX_LOOKUP_CHAINS:
        raise UnsupportedGenerationError(f"{name}={requested!r}; allowed: an int from 1 to {MAX_LOOKUP_CHAINS} "
                                         "(prompt-lookup chains per round).")
    if sampled and requested > 1:
        raise UnsupportedGenerationError(f"{name}={requested} with do_sample=True; allowed: 1 when sampling "
                                         "(two chains are verified for greedy decoding only).")
    return requested


def cross_attention_window_for(draft, generation_config, requested) -> int | None:
    """The window a call's draft reads: None (every committed target entry) or W (the anchors and the newest
    W), from ``longspec_cross_attention_window`` (0: every entry), else the generation config's, else the
    draft config's ``cross_attention_window``. Refused unless an int >= 0."""
    requested, name = asked(generation_config, "longspec_cross_attention_window", requested)
    smallest = 0
    if requested is None:  # the config's own rule: None or a positive int
        requested, name, smallest = draft.config.cross_attention_window, "the draft config's cross_attention_window", 1
        if requested is None:
            return None
    if isinstance(requested, bool) or not isinstance(requested, int) or requested < smallest:
        allowed = "or None (every entry)" if smallest else \
            "0 (every entry) or None (the draft config's cross_attention_window)"
        raise UnsupportedGenerationError(
            f"{name}={requested!r}; allowed: an int W >= 1 (the draft reads the target cache's "
            f"{draft.config.num_anchor_tokens} first entries and its newest W), {allowed}.")
    return requested or None


def rerank_leaves_for(draft, generation_config, requested, on_cpu: bool) -> bool:
    """``longspec_rerank_leaves`` (else the generation config's, else, on a CPU, the draft config's
    ``cpu_tree_rerank_leaves`` where set, else its ``tree_rerank_leaves``): whether the tree's last width holds the
    best children of every node the draft runs (draft_tree.py)."""
    requested, name = asked(generation_config, "longspec_rerank_leaves", requested)
    if requested is None:
        on_cpu_default = getattr(draft.config, "cpu_tree_rerank_leaves", None) if on_cpu else None
        return bool(getattr(draft.config, "tree_rerank_leaves", False) if on_cpu_default is None else on_cpu_default)
    if not isinstance(requested, bool):
        raise UnsupportedGenerationError(
            f"{name}={requested!r}; allowed: True, False or None (the draft config's tree_rerank_leaves).")
    return requested


def plain_steps_for(draft, generation_config, requested, on_cpu: bool, on_host: bool) -> bool:
    """Whether a call may take plain one-token steps where rounds deliver fewer tokens per second
    (plain_steps.py): ``longspec_plain_steps``, else the generation config's, else, on a CPU, the draft config's
    ``cpu_plain_steps`` (off on other devices, where a replayed round costs about a plain step). Refused where
    rounds walk the tree on the host, and for a tensor-parallel target, whose ranks must all choose alike but
    time their steps apart."""
    requested, name = asked(generation_config, "longspec_plain_steps", requested)
    if requested is None:
        return on_cpu and draft.config.cpu_plain_steps and not on_host and draft._head_shard is None
    if not isinstance(requested, bool):
        raise UnsupportedGenerationError(
            f"{name}={requested!r}; allowed: True, False or None (on a CPU, the draft config's cpu_plain_steps).")
    if requested and on_host:
        raise UnsupportedGenerationError(
            f"{name}=True with logits processors other than temperature, top-k, top-p and min-p, or with "
            "output_scores / output_logits; allowed there: False (such rounds walk the tree on the host).")
    if requested and draft._head_shard is not None:
        raise UnsupportedGenerationError(
            f"{name}=True with a tensor-parallel target; allowed there: False (each rank times its own steps, and "
            "all must choose alike).")
    return requested


# generate() options that pick another speculation method: a LongSpec call would silently drop them
OTHER_SPECULATION = {
    "prompt_lookup_num_tokens": "its own prompt-lookup chain is longspec_lookup_tokens=K, verified beside the tree",
    "assistant_early_exit": "the draft is a separate one-layer model reading the target's cache",
}

# the other decoding methods generate() picks from its options (transformers' get_generation_mode), by the options
# that ask for them: a LongSpec call would run greedy search instead and drop them silently (beam search is refused
# by num_beams, the other speculation methods above by name)
OTHER_DECODING = {
    GenerationMode.CONTRASTIVE_SEARCH: ("penalty_alpha", "top_k"),
    GenerationMode.DOLA_GENERATION: ("dola_layers",),
    GenerationMode.CONSTRAINED_BEAM_SEARCH: ("constraints", "force_words_ids"),
    GenerationMode.ASSISTED_GENERATION: ("use_mtp",),  # multi-token prediction heads: another speculation
}


def check_decoding_method(generation_config) -> None:
    """Greedy search or sampling, as transformers reads the config; any other method it would run is refused."""
    mode = generation_config.get_generation_mode()
    if mode not in OTHER_DECODING:
        return
    names = [name for name in OTHER_DECODING[mode] if getattr(generation_config, name, None) is not None]
    options = ", ".join(f"{name}={getattr(generation_config, name)!r}" for name in names)
    raise UnsupportedGenerationError(
        f"{options} ask{'s' if len(names) == 1 else ''} generate() for {mode.value}, which a LongSpec draft does not "
        "run (it would decode greedily and ignore them); allowed with a LongSpec draft: greedy search "
        "(do_sample=False) or sampling (do_sample=True), or generate() without the draft for that method.")


# logits processors that carry state from one call to the next, so they need one call per new token, in order: a
# round calls the processors once per drafted node, on prefixes they never saw in that order (each gave other tokens
# than vanilla on the embedded target, fifty-fourth session): class -> (the option that adds it, what its state is,
# what is allowed instead)
SEQUENTIAL_PROCESSORS = {
    UnbatchedClassifierFreeGuidanceLogitsProcessor: (
        "guidance_scale other than 1: classifier-free guidance",
        "runs the target on the unconditional prompt one new token after another, in a cache of its own",
        "guidance_scale=None or 1"),
    SynthIDTextWatermarkLogitsProcessor: (
        "watermarking_config=SynthIDTextWatermarkingConfig(...)",
        "keeps the contexts it has seen, call after call",
        "watermarking_config=None or a WatermarkingConfig (its watermark is a function of each prefix)"),
}


def check_processors_see_each_prefix_alone(logits_processor) -> None:
    """Refuse the logits processors whose output depends on the calls before (SEQUENTIAL_PROCESSORS), asked by an
    option or passed in ``logits_processor``."""
    for processor in logits_processor or []:
        for kind, (option, why, allowed) in SEQUENTIAL_PROCESSORS.items():
            if isinstance(processor, kind):
                raise UnsupportedGenerationError(
                    f"{kind.__name__} ({option}, or passed in logits_processor) {why}; a LongSpec round calls the logits "
                    "processors once per drafted node, on prefixes out of that order, so its tokens would not be "
                    f"vanilla's; allowed with a LongSpec draft: {allowed}, or generate() without the draft.")


def check_cache_keeps_kv_on_device(cache) -> None:
    """An offloaded or quantized cache saves device memory that a LongSpec call cannot: its rounds verify in a
    preallocated full-precision cache on the target's device (generation/tree_cache.py), so it is refused."""
    if getattr(cache, "offloading", False):
        kind = "an offloaded"
        where = "off the device (cache_implementation='offloaded' or a cache with offloading=True)"
    elif isinstance(cache, QuantizedCache):
        kind, where = "a quantized", "quantized (cache_implementation='quantized' or a QuantizedCache)"
    else:
        return
    raise UnsupportedGenerationError(
        f"generate() prepared {kind} KV cache ({type(cache).__name__}): it saves device memory by keeping the KV "
        f"{where}, which a LongSpec call cannot do: its rounds verify in a preallocated full-precision cache on the "
        "target's device; allowed: cache_implementation None, 'dynamic' or 'static', or a DynamicCache or StaticCache "
        "without offloading passed as past_key_values.")


def check_request(model, draft, input_ids, generation_config, model_kwargs, verify_mode, tree_widths=None,
                  max_nodes=None, logits_processor=None, streamer=None) -> None:
    """Everything that can be wrong is refused before any forward runs."""
    if draft is None:
        raise UnsupportedGenerationError("longspec_generate needs longspec_draft=<LongSpecDraftModel bound to the target>.")
    check_tree_options(tree_widths, max_nodes)
    check_tree_options(
        getattr(generation_config, "longspec_tree_widths", None), getattr(generation_config, "longspec_max_nodes", None),
        widths_name="generation_config.longspec_tree_widths", max_nodes_name="generation_config.longspec_max_nodes",
    )
    if draft.target is not model:
        raise IncompatibleDraftError(
            "This draft is bound to another target model; call draft.bind(target) for the model you generate with."
        )
    shard = draft._head_shard
    if (shard.world_size if shard is not None else 1) != (getattr(model, "tp_size", None) or 1):
        raise IncompatibleDraftError(
            f"The target is split over tp_size={getattr(model, 'tp_size', None) or 1} ranks but the draft was bound for "
            f"{shard.world_size if shard is not None else 1}; bind it again after loading: draft.bind(target)."
        )
    target_vocab = model.get_output_embeddings().weight.shape[0]
    if draft.config.vocab_size != target_vocab:
        raise IncompatibleDraftError(
            f"vocab size mismatch: draft has {draft.config.vocab_size}, target LM head has {target_vocab}"
        )
    if model_kwargs.get("inputs_embeds") is not None:
        raise UnsupportedGenerationError(
            "inputs_embeds: a LongSpec call prefills the prompt from its token ids (and drafts from them), so "
            "embeddings other than the tokens' own (soft prompts, multimodal inputs) would not give vanilla's output; "
            "allowed: input_ids without inputs_embeds, or generate() without the draft for inputs_embeds.")
    if generation_config.num_beams != 1:
        raise UnsupportedGenerationError(
            f"Beam search (num_beams={generation_config.num_beams}) cannot use a LongSpec assistant; "
            "use greedy (do_sample=False) or sampling (do_sample=True) with num_beams=1."
        )
    for name, instead in OTHER_SPECULATION.items():
        value = getattr(generation_config, name, None)
        if value is not None:
            raise UnsupportedGenerationError(
                f"{name}={value!r} asks generate() for another kind of speculation than the LongSpec draft passed as "
                f"assistant_model, which would ignore it; allowed: {name}=None with a LongSpec draft ({instead}), or "
                "generate() without the draft."
            )
    check_decoding_method(generation_config)
    check_processors_see_each_prefix_alone(logits_processor)
    # generate() has already repeated each prompt num_return_sequences times (sampling only: it refuses greedy
    # calls that ask for more than one), so those rows are an ordinary batch, each drawing on its own
    batch = input_ids.shape[0]
    if batch > 1:
        rows = f"batch size {batch}"
        if generation_config.num_return_sequences > 1:
            rows += f" ({batch // generation_config.num_return_sequences} prompt(s) x num_return_sequences=" \
                    f"{generation_config.num_return_sequences})"
        if generation_config.return_dict_in_generate and (generation_config.output_scores
                                                           or generation_config.output_logits):
            raise UnsupportedGenerationError(
                f"{rows}: LongSpec returns scores and logits (output_scores / output_logits) for "
                "batch size 1 only; allowed with batches: greedy or sampling, with logits processors, "
                "returning sequences (and the cache)."
            )
        if streamer is not None:
            raise UnsupportedGenerationError(f"a streamer supports batch size 1, like generate(); got {rows}.")
    if generation_config.output_attentions or generation_config.output_hidden_states:
        raise UnsupportedGenerationError(
            "output_attentions / output_hidden_states are not available with LongSpec speculation; "
            "output_scores and output_logits are."
        )
    if generation_config.use_cache is False:
        raise UnsupportedGenerationError("LongSpec speculation reads the target's KV cache: use_cache must be True.")
    if verify_mode not in VERIFY_MODES:
        raise UnsupportedGenerationError(f"longspec_verify_attention={verify_mode!r}; allowed: {VERIFY_MODES}")
    attention_mask = model_kwargs.get("attention_mask")
    if attention_mask is not None and not bool((attention_mask == 1).all()):
        masked = int((attention_mask != 1).sum())
        ones = attention_mask.long().sum(dim=1, keepdim=True)
        left_padded = bool((attention_mask.long() == (torch.arange(attention_mask.shape[1], device=attention_mask.device)
                                                        >= attention_mask.shape[1] - ones).long()).all())
        if not left_padded:
            raise UnsupportedGenerationError(
                f"LongSpec speculation supports left padding only: the attention_mask has {masked} masked (0) "
                f"position(s) out of {attention_mask.numel()} that are not all at the start of their rows. Allowed: "
                "no attention_mask, one of all 1s, or left padding (tokenizer padding_side='left', as generate() "
                "expects for decoder-only models)."
            )
    max_positions = model.config.get_text_config().max_position_embeddings
    if generation_config.max_length > max_positions:
        raise UnsupportedGenerationError(
            f"prompt ({input_ids.shape[1]} tokens) + new tokens = max_length {generation_config.max_length} "
            f"exceeds the target's max_position_embeddings ({max_positions}); shorten the prompt or max_new_tokens."
        )
    cache = cache_from_model_kwargs(model_kwargs)
    if cache is None:
        raise UnsupportedGenerationError("generate() prepared no KV cache; LongSpec needs one (use_cache=True).")
    for index, layer in enumerate(getattr(cache, "layers", None) or []):
        if getattr(layer, "is_sliding", False):
            raise UnsupportedGenerationError(
                f"Cache layer {index} is a sliding-window layer ({type(layer).__name__}); LongSpec needs full-attention "
                "layers (use the default cache or cache_implementation='static')."
            )
    if getattr(cache, "layers", None) is None:
        raise UnsupportedGenerationError(
            f"LongSpec reads the prefilled KV cache layer by layer; {type(cache).__name__} has no layers "
            "(use the default DynamicCache or cache_implementation='static')."
        )
    check_cache_keeps_kv_on_device(cache)
    if int(cache.get_seq_length()) >= input_ids.shape[1]:
        raise UnsupportedGenerationError(
            f"The cache already holds {cache.get_seq_length()} tokens for a {input_ids.shape[1]}-token input; "
            "pass at least one uncached token."
        )
    short = getattr(cache, CUT_SHORT_ROWS, None)
    if int(cache.get_seq_length()) > 0 and short:
        raise UnsupportedGenerationError(
            f"This cache comes from a batched LongSpec call in which row(s) {short} stopped early (eos or a stopping "
            "criterion): their slots after the stop hold no K/V, where vanilla generate() keeps the K/V of the pad "
            "tokens it went on feeding. Continuing from it could differ from vanilla; allowed: continue rows that "
            "ran to the end, or pass the whole prompt with an empty cache."
        )


