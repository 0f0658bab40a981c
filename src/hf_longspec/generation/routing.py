"""How ``target.generate(ids, assistant_model=draft)`` reaches LongSpec speculation.

Binding a draft (``draft.bind(target)``) runs ``on_bind``, which (once per target)
- installs an instance-level ``generate`` that routes a LongSpec draft passed as ``assistant_model``
  to ``longspec_generate`` through transformers' ``custom_generate`` hook (generate() still prepares
  the config, processors, stopping criteria and cache); any other call goes to the stock method;
- selects hybrid tree attention as the target's attention implementation. Non-tree calls keep the
  implementation the target had (SDPA or eager), so stock generate and plain forwards are unchanged;
  tree verification is chosen per call by forward kwargs, never by switching model-wide state.
"""

from __future__ import annotations

import types
import warnings

import torch

from ..attention import use_hybrid_attention
from ..errors import UnsupportedGenerationError
from ..generate_inputs import healed_prompt, inferred_pad_token, split_stop_strings
from ..modeling_longspec import BIND_HOOKS, LongSpecDraftModel
from ..tree_options import check_tree_options
from .loop import longspec_generate
from .stats import LongSpecStats

def install_longspec_generate(target) -> None:
    """Give `target` a generate() that routes LongSpec drafts to tree speculation (idempotent)."""
    use_hybrid_attention(target)
    if getattr(target, "_longspec_generate_installed", False):
        return
    target.generate = types.MethodType(_routing_generate, target)
    target._longspec_generate_installed = True


# longspec_generate's arguments that the route fills in from generate()'s own (a caller's would collide or be replaced)
SET_BY_ROUTING = {
    "longspec_draft": "assistant_model=draft",
    "longspec_streamer": "streamer=...",
    "longspec_stop_strings": "stop_strings=... with tokenizer=...",
    "longspec_tokenizer": "tokenizer=... with stop_strings=...",
    "longspec_return_cache": "past_key_values=... to get the committed cache back (or return_dict_in_generate=True)",
}


def _routing_generate(self, inputs=None, *args, assistant_model=None, **kwargs):
    stock_generate = type(self).generate
    if not isinstance(assistant_model, LongSpecDraftModel):
        return stock_generate(self, inputs, *args, assistant_model=assistant_model, **kwargs)
    if kwargs.get("custom_generate") is not None:
        raise UnsupportedGenerationError("Pass either a LongSpec assistant_model or custom_generate, not both.")
    if kwargs.get("synced_gpus"):
        # generate() does not hand synced_gpus to a custom_generate callable: refuse it here rather than
        # decode unsynchronized while other ranks wait
        raise UnsupportedGenerationError(
            "synced_gpus=True (ZeRO-3 / FSDP generation across ranks) is not supported with LongSpec speculation; "
            "allowed: synced_gpus=False or unset, with the target whole on each device."
        )
    options = {name: kwargs.pop(name) for name in list(kwargs) if name.startswith("longspec_")}
    internal = [name for name in SET_BY_ROUTING if name in options]
    if internal:
        raise UnsupportedGenerationError(
            f"{', '.join(internal)}: set by generate() itself with a LongSpec assistant_model; allowed: "
            + ", ".join(SET_BY_ROUTING[name] for name in internal) + "."
        )
    check_tree_options(options.get("longspec_tree_widths"), options.get("longspec_max_nodes"))
    # generate(inputs, generation_config, ...) may pass the config positionally
    generation_config = args[0] if args else kwargs.get("generation_config")
    input_ids = inputs if inputs is not None else kwargs.get("input_ids")
    pad = inferred_pad_token(self, input_ids, generation_config, kwargs)
    if pad is not None and input_ids.shape[0] == 1:
        return _generate_without_speculation(self, stock_generate, assistant_model, pad, inputs, args, kwargs)
    healed = healed_prompt(self, input_ids, generation_config, kwargs)
    if healed is not input_ids:
        if inputs is not None:
            inputs = healed
        else:
            kwargs["input_ids"] = healed
    stop_strings, tokenizer, new_config = split_stop_strings(self, generation_config, kwargs)
    if new_config is not generation_config:
        if args:
            args = (new_config, *args[1:])
        else:
            kwargs["generation_config"] = new_config
    if stop_strings is not None:
        options.update(longspec_stop_strings=stop_strings, longspec_tokenizer=tokenizer)
    # the committed KV is written back into generate's cache only if the caller can read it: a cache they
    # passed in (or return_dict_in_generate, checked later); else it would be a second copy of every row's KV
    options["longspec_return_cache"] = kwargs.get("past_key_values") is not None or kwargs.get("cache") is not None
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


def _generate_without_speculation(model, stock_generate, draft, pad: int, inputs, args, kwargs):
    """A prompt holding pad_token_id and no attention_mask: generate() masks those tokens, which tree
    verification cannot do, so the call runs as plain generate() (identical output) and says why."""
    input_ids = inputs if inputs is not None else kwargs.get("input_ids")
    positions = (input_ids[0] == pad).nonzero().flatten().tolist()
    shown = ", ".join(map(str, positions[:8])) + (", ..." if len(positions) > 8 else "")
    warnings.warn(
        f"The prompt contains pad_token_id={pad} (at position {shown}) and no attention_mask was passed, so "
        "generate() treats those tokens as padding and masks them. LongSpec speculation cannot run over a masked "
        "prompt: this call decodes without speculation (same output as generate() without assistant_model). "
        "Pass attention_mask=torch.ones_like(input_ids) to treat them as ordinary tokens and speculate.",
        UserWarning,
        stacklevel=3,
    )
    out = stock_generate(model, inputs, *args, **kwargs)
    sequences = out if isinstance(out, torch.Tensor) else out.sequences
    prompt = input_ids.shape[1]
    draft.last_stats = LongSpecStats(prompt_tokens=prompt, new_tokens=sequences.shape[1] - prompt)
    return out


if install_longspec_generate not in BIND_HOOKS:
    BIND_HOOKS.append(install_longspec_generate)
