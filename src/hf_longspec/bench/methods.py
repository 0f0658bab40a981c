"""The decoding methods compared side by side, and how each one is called.

Every method is one `target.generate(...)` call on the same loaded model, greedy, with the same
max_new_tokens; only the attention backend and the generate kwargs differ.

- vanilla_static: stock greedy decoding with `cache_implementation="static"` (on CUDA transformers
  compiles the decoding step into CUDA graphs): the fastest vanilla a user runs, the headline baseline.
- vanilla_eager / vanilla_sdpa: stock greedy decoding with the default DynamicCache.
- pld: transformers' prompt-lookup decoding (`prompt_lookup_num_tokens=`), attention sdpa.
- longspec_chain / longspec_tree: LongSpec with a one-node-per-depth chain / the draft's default
  tree. Verification uses hybrid tree attention, whose prefill (non-tree) path is sdpa.
- longspec_tree_eager: the default tree verified by the target's own eager attention with a 4D
  tree mask (`longspec_verify_attention="masked"`): same backend as vanilla eager.
"""

from __future__ import annotations

from dataclasses import dataclass, field

VANILLA_EAGER, VANILLA_SDPA, VANILLA_STATIC = "vanilla_eager", "vanilla_sdpa", "vanilla_static"
METHOD_NAMES = (VANILLA_STATIC, VANILLA_EAGER, VANILLA_SDPA, "pld", "longspec_chain", "longspec_tree",
                "longspec_tree_eager")
LONGSPEC_METHODS = ("longspec_chain", "longspec_tree", "longspec_tree_eager")
VANILLA_BY_BACKEND = {"eager": VANILLA_EAGER, "sdpa": VANILLA_SDPA}


@dataclass(frozen=True)
class Method:
    name: str
    label: str  # human-readable, states the attention used
    attn_implementation: str  # set on the model before the call (LongSpec switches to hybrid itself)
    prefill_backend: str  # attention of the prompt forward: picks the measured prefill time
    generate_kwargs: dict = field(default_factory=dict)
    uses_draft: bool = False

    @property
    def is_vanilla(self) -> bool:
        return self.name in (*VANILLA_BY_BACKEND.values(), VANILLA_STATIC)

    @property
    def same_backend_vanilla(self) -> str:
        """The vanilla run with this method's (prefill) attention backend: its fair baseline."""
        return VANILLA_BY_BACKEND[self.prefill_backend]


def build_methods(names, draft=None, pld_tokens: int = 10) -> list[Method]:
    """Methods in `names` (order of METHOD_NAMES); the three vanilla references are always included."""
    unknown = set(names) - set(METHOD_NAMES)
    if unknown:
        raise ValueError(f"unknown methods {sorted(unknown)}; choose from {METHOD_NAMES}")
    wanted = set(names) | {VANILLA_EAGER, VANILLA_SDPA, VANILLA_STATIC}
    if draft is None:
        wanted -= set(LONGSPEC_METHODS)
    tree = list(draft.config.tree_widths) if draft is not None else []
    catalogue = {
        VANILLA_STATIC: Method(VANILLA_STATIC, "vanilla (static cache, sdpa)", "sdpa", "sdpa",
                               {"cache_implementation": "static"}),
        VANILLA_EAGER: Method(VANILLA_EAGER, "vanilla (eager)", "eager", "eager"),
        VANILLA_SDPA: Method(VANILLA_SDPA, "vanilla (sdpa)", "sdpa", "sdpa"),
        "pld": Method("pld", f"prompt lookup, {pld_tokens} tok (sdpa)", "sdpa", "sdpa",
                      {"prompt_lookup_num_tokens": pld_tokens}),
        "longspec_chain": Method("longspec_chain", f"LongSpec chain {len(tree)} (hybrid)", "sdpa", "sdpa",
                                 {"longspec_tree_widths": [1] * len(tree), "longspec_verify_attention": "hybrid"},
                                 uses_draft=True),
        "longspec_tree": Method("longspec_tree", f"LongSpec tree {'-'.join(map(str, tree))} (hybrid)", "sdpa", "sdpa",
                                {"longspec_tree_widths": tree, "longspec_verify_attention": "hybrid"},
                                uses_draft=True),
        "longspec_tree_eager": Method("longspec_tree_eager", f"LongSpec tree {'-'.join(map(str, tree))} (eager, 4D mask)",
                                      "eager", "eager",
                                      {"longspec_tree_widths": tree, "longspec_verify_attention": "masked"},
                                      uses_draft=True),
    }
    return [catalogue[name] for name in METHOD_NAMES if name in wanted]
