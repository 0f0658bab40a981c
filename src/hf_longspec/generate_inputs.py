"""generate() arguments that transformers' `custom_generate` route loses or treats differently.

- `tokenizer=`: generate() keeps it only for its built-in decoding methods; on the callable
  `custom_generate` route it is dropped before the stopping criteria are built, so `stop_strings`
  would fail with "could not locate a tokenizer". The router hides the stop strings from generate()
  and hands them, with the tokenizer, to `longspec_generate`, which adds the same
  `StopStringCriteria` that generate() would have built.
- `token_healing=True` needs that tokenizer too, and fails on the same route: the router heals the prompt
  itself, with generate()'s own `heal_tokens`, and turns generate()'s healing off.
- A prompt that contains `pad_token_id` with no `attention_mask`: generate() infers a mask with
  zeros there (when pad is not also eos) and masks those tokens. LongSpec cannot speculate over
  a masked prefix, so such a call runs as plain generate() (same output), with a warning.
"""

from __future__ import annotations

import copy

import torch

from .errors import UnsupportedGenerationError

def resolved_option(model, name: str, generation_config, kwargs: dict):
    """The value generate() will use for a GenerationConfig field: kwargs > generation_config > model default."""
    value = kwargs.get(name)
    if value is not None:
        return value
    if generation_config is not None and getattr(generation_config, name, None) is not None:
        return getattr(generation_config, name)
    return getattr(getattr(model, "generation_config", None), name, None)


def split_stop_strings(model, generation_config, kwargs: dict):
    """Take stop strings out of a generate() call so generate() does not need the tokenizer.

    Returns (stop_strings, tokenizer, generation_config); `kwargs` loses 'stop_strings' and
    'tokenizer'. Without stop strings or without a tokenizer nothing is hidden, so generate()
    raises its own error when stop strings have no tokenizer."""
    tokenizer = kwargs.pop("tokenizer", None)
    stop_strings = resolved_option(model, "stop_strings", generation_config, kwargs)
    if stop_strings is None or tokenizer is None:
        return None, tokenizer, generation_config
    kwargs.pop("stop_strings", None)
    if generation_config is None:
        kwargs["stop_strings"] = None  # an explicit None outranks the model's default stop strings
    else:
        generation_config = copy.deepcopy(generation_config)
        generation_config.stop_strings = None
        if getattr(model.generation_config, "stop_strings", None) is not None:
            kwargs["stop_strings"] = None  # else generate() fills the None back from the model's default
    return stop_strings, tokenizer, generation_config


def healed_prompt(model, input_ids, generation_config, kwargs: dict):
    """The prompt healed as generate() heals it with ``token_healing=True`` (``model.heal_tokens``, one greedy step
    per row), with generate()'s own healing turned off in `kwargs`; `input_ids` as it is without healing or without
    a tokenizer (generate() then raises its own error for the missing tokenizer)."""
    tokenizer = kwargs.get("tokenizer")
    if tokenizer is None or not resolved_option(model, "token_healing", generation_config, kwargs):
        return input_ids
    kwargs["token_healing"] = False
    return model.heal_tokens(input_ids, tokenizer)


def with_stop_strings(stopping_criteria, stop_strings, tokenizer):
    """`stopping_criteria` plus the StopStringCriteria generate() builds for `stop_strings`."""
    if stop_strings is None:
        return stopping_criteria
    if tokenizer is None:
        raise UnsupportedGenerationError(
            f"stop_strings={stop_strings!r} need the model's tokenizer: pass tokenizer=<tokenizer> to generate() "
            "(or longspec_tokenizer=<tokenizer> when calling longspec_generate through custom_generate)."
        )
    from transformers import StoppingCriteriaList
    from transformers.generation.stopping_criteria import StopStringCriteria

    criteria = StoppingCriteriaList(list(stopping_criteria) if stopping_criteria is not None else [])
    criteria.append(StopStringCriteria(tokenizer=tokenizer, stop_strings=stop_strings))
    return criteria


def inferred_pad_token(model, input_ids, generation_config, kwargs: dict):
    """The pad token id when generate() would infer an attention mask with zeros for this call, else None.

    generate() infers a mask only when none is passed, the input is a 2-D tensor of ids that
    contains pad_token_id, and pad_token_id is not one of the eos ids (with no pad_token_id set,
    generate() pads with eos, so nothing is inferred either)."""
    if kwargs.get("attention_mask") is not None or not isinstance(input_ids, torch.Tensor):
        return None
    if input_ids.dim() != 2 or input_ids.dtype not in (torch.int32, torch.int64):
        return None
    pad = resolved_option(model, "pad_token_id", generation_config, kwargs)
    if pad is None:
        return None
    eos = resolved_option(model, "eos_token_id", generation_config, kwargs)
    if isinstance(eos, torch.Tensor):
        eos = eos.flatten().tolist()
    eos_ids = [] if eos is None else [int(e) for e in (eos if isinstance(eos, (list, tuple)) else [eos])]
    pad = int(pad)
    if pad in eos_ids or not bool((input_ids == pad).any()):
        return None
    return pad
