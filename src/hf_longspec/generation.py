"""LongSpec tree speculation inside `target.generate`.

Binding a draft installs an instance-level `generate` on the target: a LongSpec draft passed
as `assistant_model` is routed to `longspec_generate` through transformers' `custom_generate`
hook (generate() still prepares the config, processors, stopping criteria and cache); any
other call goes to the stock method untouched. `longspec_generate` is also usable directly:
`target.generate(ids, custom_generate=longspec_generate, longspec_draft=draft)`.

One round:  draft a tree from the ring buffer + target cache  ->  ONE target forward over the
tree (hybrid tree attention)  ->  walk the accepted path  ->  gather it into every cache layer
->  write it into the draft's ring buffer.
"""

from __future__ import annotations

import contextlib
import types
from collections import Counter
from dataclasses import dataclass, field

import torch

from .cache_commit import check_commitable_cache, commit_tree_path, crop_cache
from .errors import IncompatibleDraftError, UnsupportedGenerationError
from .target_support import cache_argument_name, cache_from_model_kwargs
from .tree import DraftTree, TreeDrafter, plan_widths
from .verification import PathVerifier

VERIFY_MODES = ("hybrid", "masked")


@dataclass
class LongSpecStats:
    """Speculation statistics of the last generate() call (`draft.last_stats`)."""

    rounds: int = 0
    emitted_tokens: int = 0  # tokens produced by verification rounds (bonus tokens included)
    drafted_nodes: int = 0
    prompt_tokens: int = 0
    new_tokens: int = 0
    accepted_lengths: Counter = field(default_factory=Counter)  # tokens per round -> rounds
    non_chain_commits: int = 0  # rounds whose accepted path left some node's first child

    @property
    def tau(self) -> float:
        """Mean tokens emitted per target verification forward."""
        return self.emitted_tokens / self.rounds if self.rounds else 0.0

    def histogram(self) -> dict[int, int]:
        return dict(sorted(self.accepted_lengths.items()))

    def as_dict(self) -> dict:
        return {
            "tau": self.tau,
            "rounds": self.rounds,
            "emitted_tokens": self.emitted_tokens,
            "drafted_nodes": self.drafted_nodes,
            "prompt_tokens": self.prompt_tokens,
            "new_tokens": self.new_tokens,
            "accepted_length_histogram": self.histogram(),
            "non_chain_commits": self.non_chain_commits,
        }


# --------------------------------------------------------------------------- routing
def install_longspec_generate(target) -> None:
    """Give `target` a generate() that routes LongSpec drafts to tree speculation (idempotent)."""
    if getattr(target, "_longspec_generate_installed", False):
        return
    target.generate = types.MethodType(_routing_generate, target)
    target._longspec_generate_installed = True


def _routing_generate(self, inputs=None, *args, assistant_model=None, **kwargs):
    from .modeling_longspec import LongSpecDraftModel

    stock_generate = type(self).generate
    if not isinstance(assistant_model, LongSpecDraftModel):
        return stock_generate(self, inputs, *args, assistant_model=assistant_model, **kwargs)
    if kwargs.get("custom_generate") is not None:
        raise UnsupportedGenerationError("Pass either a LongSpec assistant_model or custom_generate, not both.")
    options = {name: kwargs.pop(name) for name in list(kwargs) if name.startswith("longspec_")}
    return stock_generate(
        self,
        inputs,
        *args,
        custom_generate=longspec_generate,
        longspec_draft=assistant_model,
        longspec_streamer=kwargs.pop("streamer", None),
        **options,
        **kwargs,
    )


# --------------------------------------------------------------------------- checks
def _check_request(model, draft, input_ids, generation_config, model_kwargs, verify_mode) -> None:
    """Everything that can be wrong is refused before any forward runs."""
    if draft is None:
        raise UnsupportedGenerationError("longspec_generate needs longspec_draft=<LongSpecDraftModel bound to the target>.")
    if getattr(model, "tp_size", None) not in (None, 1):
        raise UnsupportedGenerationError(
            f"The target is tensor-parallel (tp_size={model.tp_size}); LongSpec verification does not support "
            "sharded targets yet (the draft reads one target layer's full KV heads). Load the target on one device."
        )
    if draft.target is not model:
        raise IncompatibleDraftError(
            "This draft is bound to another target model; call draft.bind(target) for the model you generate with."
        )
    target_vocab = model.get_output_embeddings().weight.shape[0]
    if draft.config.vocab_size != target_vocab:
        raise IncompatibleDraftError(
            f"vocab size mismatch: draft has {draft.config.vocab_size}, target LM head has {target_vocab}"
        )
    if generation_config.num_beams != 1:
        raise UnsupportedGenerationError(
            f"Beam search (num_beams={generation_config.num_beams}) cannot use a LongSpec assistant; "
            "use greedy (do_sample=False) or sampling (do_sample=True) with num_beams=1."
        )
    if generation_config.num_return_sequences != 1:
        raise UnsupportedGenerationError(
            f"num_return_sequences={generation_config.num_return_sequences}: LongSpec speculation returns one sequence."
        )
    if input_ids.shape[0] != 1:
        raise UnsupportedGenerationError(
            f"LongSpec speculation supports batch size 1; got batch size {input_ids.shape[0]} "
            "(num_return_sequences counts too)."
        )
    if generation_config.output_attentions or generation_config.output_hidden_states:
        raise UnsupportedGenerationError(
            "output_attentions / output_hidden_states are not available with LongSpec speculation; "
            "output_scores and output_logits are."
        )
    if generation_config.use_cache is False:
        raise UnsupportedGenerationError("LongSpec speculation reads the target's KV cache: use_cache must be True.")
    if verify_mode not in VERIFY_MODES:
        raise UnsupportedGenerationError(f"longspec_verify_attention={verify_mode!r}; allowed: {VERIFY_MODES}")
    if verify_mode == "masked" and model.config._attn_implementation not in ("eager", "sdpa"):
        raise UnsupportedGenerationError(
            f"longspec_verify_attention='masked' needs the target's attention to be eager or sdpa, "
            f"not {model.config._attn_implementation!r}."
        )
    attention_mask = model_kwargs.get("attention_mask")
    if attention_mask is not None and not bool((attention_mask == 1).all()):
        raise UnsupportedGenerationError("LongSpec speculation does not support padded inputs (attention_mask with 0s).")
    max_positions = model.config.get_text_config().max_position_embeddings
    if generation_config.max_length > max_positions:
        raise UnsupportedGenerationError(
            f"prompt ({input_ids.shape[1]} tokens) + new tokens = max_length {generation_config.max_length} "
            f"exceeds the target's max_position_embeddings ({max_positions}); shorten the prompt or max_new_tokens."
        )
    cache = cache_from_model_kwargs(model_kwargs)
    if cache is None:
        raise UnsupportedGenerationError("generate() prepared no KV cache; LongSpec needs one (use_cache=True).")
    check_commitable_cache(cache)
    if cache.get_seq_length() >= input_ids.shape[1]:
        raise UnsupportedGenerationError(
            f"The cache already holds {cache.get_seq_length()} tokens for a {input_ids.shape[1]}-token input; "
            "pass at least one uncached token."
        )


@contextlib.contextmanager
def _verification_attention(model, verify_mode: str):
    """Run the target with hybrid tree attention for this call, restoring its own afterwards."""
    if verify_mode != "hybrid":
        yield
        return
    from .attention import LONGSPEC_ATTENTION, register_longspec_attention

    register_longspec_attention()
    previous = model.config._attn_implementation
    if previous != LONGSPEC_ATTENTION:
        model.set_attn_implementation(LONGSPEC_ATTENTION)
    try:
        yield
    finally:
        if previous != LONGSPEC_ATTENTION:
            model.set_attn_implementation(previous)


# --------------------------------------------------------------------------- the loop
class _Emitter:
    """Appends tokens one at a time, applying stopping criteria and the streamer as generate() does."""

    def __init__(self, input_ids, stopping_criteria, streamer, keep_scores: bool):
        self.sequence = input_ids
        self.stopping_criteria = stopping_criteria
        self.streamer = streamer
        self.scores, self.logits = ([], []) if keep_scores else (None, None)
        self.finished = False

    def emit(self, token: int, scores=None, logits=None) -> None:
        self.sequence = torch.cat([self.sequence, self.sequence.new_tensor([[token]])], dim=1)
        if self.scores is not None:
            self.scores.append(scores)
            self.logits.append(logits)
        if self.streamer is not None:
            self.streamer.put(self.sequence[:, -1:].cpu())
        self.finished = bool(self.stopping_criteria(self.sequence, scores).all())


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
    longspec_verify_attention: str = "hybrid",
    **model_kwargs,
):
    """Lossless LongSpec tree speculation; a `custom_generate` callable for transformers' generate()."""
    draft = longspec_draft
    if synced_gpus:
        raise UnsupportedGenerationError("synced_gpus is not supported with LongSpec speculation.")
    _check_request(model, draft, input_ids, generation_config, model_kwargs, longspec_verify_attention)
    widths = longspec_tree_widths or getattr(generation_config, "longspec_tree_widths", None) or draft.config.tree_widths
    max_nodes = longspec_max_nodes or getattr(generation_config, "longspec_max_nodes", None) or draft.config.tree_max_nodes
    do_sample = bool(generation_config.do_sample)
    keep_scores = bool(generation_config.return_dict_in_generate and (generation_config.output_scores or generation_config.output_logits))
    processors = logits_processor if logits_processor is not None and len(logits_processor) > 0 else None

    cache = cache_from_model_kwargs(model_kwargs)
    cache_kwargs = {cache_argument_name(model): cache, "use_cache": True}
    stats = LongSpecStats(prompt_tokens=input_ids.shape[1])
    draft.last_stats = stats
    streamer = longspec_streamer
    if streamer is not None:
        streamer.put(input_ids.cpu())
    emitter = _Emitter(input_ids, stopping_criteria, streamer, keep_scores)
    drafter = TreeDrafter(draft, processors, do_sample)
    verifier = PathVerifier(processors, do_sample, keep_scores)
    max_length = generation_config.max_length

    with _verification_attention(model, longspec_verify_attention):
        cached = cache.get_seq_length()
        positions = torch.arange(cached, input_ids.shape[1], device=input_ids.device)[None]
        out = model(input_ids=input_ids[:, cached:], position_ids=positions, logits_to_keep=1, **cache_kwargs)
        logits = out.logits[:, -1].to(dtype=torch.float32)
        del out
        scores = processors(input_ids, logits) if processors is not None else logits
        token = int(torch.multinomial(torch.softmax(scores, -1), 1)) if do_sample else int(scores.argmax(-1))
        emitter.emit(token, scores, logits)
        ring = draft.start(input_ids)  # every token before the new root is committed

        while not emitter.finished:
            sequence = emitter.sequence
            root_position = sequence.shape[1] - 1
            depth_budget = max_length - sequence.shape[1] - 1  # a round emits up to depth + 1 tokens
            tree = drafter.build(ring, sequence, cache, plan_widths(widths, max_nodes, depth_budget))
            target_logits = _verify_forward(model, tree, root_position, cache_kwargs, longspec_verify_attention)
            path = verifier.verify(tree, target_logits, sequence)
            commit_tree_path(cache, root_position, path.accepted_nodes)
            accepted = tree.tokens[path.accepted_nodes][None]
            draft.commit(ring, accepted, root_position + torch.arange(accepted.shape[1], device=accepted.device)[None])

            stats.rounds += 1
            stats.drafted_nodes += tree.size - 1
            nodes = path.accepted_nodes
            if any(tree.children[parent][0] != child for parent, child in zip(nodes, nodes[1:])):
                stats.non_chain_commits += 1
            emitted = 0
            for i, token in enumerate(path.tokens):
                emitter.emit(token, path.scores[i] if keep_scores else None, path.logits[i] if keep_scores else None)
                emitted += 1
                if emitter.finished:
                    break
            stats.emitted_tokens += emitted
            stats.accepted_lengths[emitted] += 1

    sequence = emitter.sequence
    crop_cache(cache, sequence.shape[1] - 1)
    stats.new_tokens = sequence.shape[1] - input_ids.shape[1]
    if streamer is not None:
        streamer.end()
    if not generation_config.return_dict_in_generate:
        return sequence
    return _generate_output(sequence, emitter, generation_config, cache)


def _verify_forward(model, tree: DraftTree, root_position: int, cache_kwargs: dict, verify_mode: str) -> torch.Tensor:
    """One target forward over the whole tree; returns float32 logits (T, V)."""
    positions = (root_position + tree.depths)[None]
    if verify_mode == "hybrid":
        extra = {"attention_mask": tree.ancestor_mask[None, None], "longspec_tree_mask": tree.ancestor_mask[None]}
    else:
        dtype = model.get_input_embeddings().weight.dtype
        full = torch.ones(tree.size, root_position + tree.size, dtype=torch.bool, device=positions.device)
        full[:, root_position:] = tree.ancestor_mask
        additive = torch.zeros(full.shape, dtype=dtype, device=positions.device).masked_fill_(~full, torch.finfo(dtype).min)
        extra = {"attention_mask": additive[None, None]}
    out = model(input_ids=tree.tokens[None], position_ids=positions, logits_to_keep=0, **extra, **cache_kwargs)
    return out.logits[0].to(dtype=torch.float32)


def _generate_output(sequence, emitter: _Emitter, generation_config, cache):
    from transformers.generation.utils import GenerateDecoderOnlyOutput

    cache_field = "cache" if "cache" in GenerateDecoderOnlyOutput.__dataclass_fields__ else "past_key_values"
    return GenerateDecoderOnlyOutput(
        sequences=sequence,
        scores=tuple(emitter.scores) if generation_config.output_scores and emitter.scores is not None else None,
        logits=tuple(emitter.logits) if generation_config.output_logits and emitter.logits is not None else None,
        **{cache_field: cache},
    )
