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

from ..attention import use_hybrid_attention
from ..errors import UnsupportedGenerationError
from ..modeling_longspec import BIND_HOOKS, LongSpecDraftModel
from .loop import longspec_generate

def install_longspec_generate(target) -> None:
    """Give `target` a generate() that routes LongSpec drafts to tree speculation (idempotent)."""
    use_hybrid_attention(target)
    if getattr(target, "_longspec_generate_installed", False):
        return
    target.generate = types.MethodType(_routing_generate, target)
    target._longspec_generate_installed = True


def _routing_generate(self, inputs=None, *args, assistant_model=None, **kwargs):
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


if install_longspec_generate not in BIND_HOOKS:
    BIND_HOOKS.append(install_longspec_generate)
