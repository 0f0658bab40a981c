"""Configuration of a LongSpec draft: the target's shapes plus LongSpec's own knobs."""

from __future__ import annotations

import copy

from transformers import PretrainedConfig

from .errors import NotADraftError

# Fields that must equal the target's: the draft reads the target's KV cache and shares its
# embeddings and LM head, so shapes and positional encoding have to agree exactly. The MLP's width
# (intermediate_size) is the draft's own: it defaults to the target's and may differ.
TARGET_MATCHED_FIELDS = (
    "hidden_size",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "hidden_act",
    "rms_norm_eps",
    "rope_parameters",
    "vocab_size",
    "max_position_embeddings",
    "attention_bias",
    "mlp_bias",
)

DEFAULT_TREE_WIDTHS = (4, 16, 16, 16, 16)
# Smaller trees for smaller node budgets (a batch, a long context): the best tau per node among the
# shapes measured on held-out text (H200, bf16, 2k-8k code / prose / chat, 2026-12-01): 32 nodes
# 2-6-8-8-8 (tau 3.39; the depth-first cut 4-16-12: 2.94), 16 nodes 2-4-4-3-3 (3.00; 4-12: 2.45),
# 8 nodes 2-2-2-2 (2.52; 1-2-2-2-1: 2.34). The full tree: 3.54. Each less its last node (tau 3.36,
# 2.91, 2.48): with the root, 32, 16 and 8 query rows, which times a power-of-two GQA group fill the
# attention kernel's row tiles exactly; one row more opens a tile that reads the whole KV again
# (Llama-3.1-8B shape, 32k: 2-6-8-8-8 15.9 ms per round, 2-6-8-8-7 13.7; docs/benchmarks.md, "Row tiles").
DEFAULT_TREE_LADDER = ((2, 6, 8, 8, 7), (2, 4, 4, 3, 2), (2, 2, 2, 1))


def check_cross_attention_window(window) -> None:
    """A config's ``cross_attention_window``: None or a positive int. Checked when the config is built and again
    when the draft reads it (a value set on a built config)."""
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
        raise ValueError(f"cross_attention_window must be None (read every target entry) or a positive int (the "
                         f"newest entries read besides the num_anchor_tokens first ones), got {window!r}")


class LongSpecDraftConfig(PretrainedConfig):
    """Config of a one-layer LongSpec draft.

    Shapes mirror the target (see `from_target_config`); LongSpec's fields:
    - intermediate_size: the width of the draft's own MLP; by default the target's (its one layer then
      has the shape of one target layer), and it may be set wider: the MLP shares nothing with the target.
    - sliding_window: tokens the draft's self-attention sees (its ring buffer size).
    - target_layer_index: which target layer's KV cache the cross-attention reads (-1 = last).
    - extra_target_layer_indices: more target layers whose KV caches the cross-attention also reads
      ([] = the method's one layer). Each layer gets its own block of num_attention_heads query heads
      (its own rows of q_proj and columns of o_proj), so the layers' reads add up in o_proj, as EAGLE-3
      fuses low, middle and high target layers. Training hands the draft the layers' K/V side by side
      along the head axis (target_layer_index first); decoding reads each layer's cache buffers in
      place. No cache is added: every target layer's K/V is cached anyway. Cannot be combined with
      target_entry_input. Measured (docs/training.md, twenty-third session; SmolLM2, untrained drafts, 700
      steps, two seeds): [4, 15] beside the last layer raised held-out tau by 0.165 +- 0.038 per prompt,
      [15] alone by 0.036 +- 0.063; [4] alone by 0.209 +- 0.097 (twenty-fourth session, one seed). Reading
      [4, 15] made the captured round at 8k 3.3% slower on the H200. Grafted onto a trained draft the new
      heads learned nothing in 800 steps, so train such a draft from the start. The shipped draft reads
      one layer. Empty by default.
    - num_anchor_tokens: anchors kept at positions 0..s-1 by Anchor-Offset training.
    - tree_widths: default draft tree, nodes per depth (the paper's "4 16 16 16 16").
    - tree_max_nodes: optional cap on drafted nodes per round (root excluded).
    - tree_batch_nodes: cap on drafted nodes per round summed over a batch: with B rows each tree keeps
      at most tree_batch_nodes // B nodes (None: no cap). The verification forward grows with rows x
      nodes; on the H200 (SmolLM2, 8k) 16 rows of 69 nodes ran at 1.36x vanilla, of 32 nodes at 2.13x.
    - tree_rerank_leaves: False (the paper's tree: the last width's nodes are the best children of the last
      depth's nodes), or True: they are the best children of every node the draft runs, by cumulative log q
      (EAGLE-2's re-ranking, for the leaves only). The draft runs the same nodes and the target verifies the
      same rows; a likely second guess near the root replaces an unlikely leaf deep down. Per call:
      ``longspec_rerank_leaves``. Measured on an H100 (docs/training.md, forty-fourth session; 210 held-out
      prompts, bf16): the tree alone 3.97 -> 4.03 tau, the captured round about 1% slower at 8k. The class
      keeps False; the shipped SmolLM2 draft and every draft `hf-longspec train` makes set True.
    - tree_ladder: smaller trees, largest first. Under a node budget smaller than tree_widths (the caps
      above, or a long context: generation/tree_budget.py) the draft uses the largest that fits.
    - cross_attention_length_scale: None (off), or n0 > 0: each cross-attention head h scales its
      queries by 1 + g_h ln(n / n0), n = the target entries the query reads, g_h learned (zero at
      first): a head may then be as sharp over 8000 keys as over the 2048 it trained on. Measured
      (docs/training.md, twelfth session): a fine-tune with it beat the shipped draft by +0.02 tau,
      within the spread of its seeds, and the gains stayed near zero, so more keys are not what
      costs prose its tau at 8k. Off by default.
    - target_entry_input: False (off), or True: the cross-attention also reads the newest target
      entry each query may see (the bound layer's key, un-rotated, and value of every KV head at
      position i - shift in training, the last committed position at decoding) through a learned
      projection (zero at first) added to its output. EAGLE feeds its draft the target's last hidden
      state for the same reason: attention over n keys has no easy way to single out the newest one,
      which holds the target's state right before the token being drafted from. Measured
      (docs/training.md, thirteenth session): a fine-tune with it tied the same fine-tune without
      (+0.01 tau, the last logs' training loss equal to the third digit): the attention already reads it. Off
      by default.
    - cross_attention_window: None (the method: the cross-attention reads every committed target entry), or
      W > 0: it reads only the first num_anchor_tokens entries and the newest W, in training (entry j <= i -
      shift, and j < anchors or j > i - shift - W) and in decoding alike. A draft trained on 2048-token
      sequences never read more than 2048 entries; at 8k it reads 8000. Measured teacher-forced on the
      H200 (docs/training.md, thirty-second session): reading the 8k cache this way gave back a third of
      what reading it whole cost the shipped draft on prose (+0.012 top-1) and most of it on code and chat;
      with W = 2048 the draft alone rose by +0.137 +- 0.068 tau at 8k on 12 CPU prompts (7 better, 0 worse).
      On CUDA the split-KV prefix kernel reads only those entries, in place (work constant in the context
      length, graph-safe); elsewhere float32 math. Off by default until its tau and round cost are measured
      on the GPU (`hf-longspec run --cross-attention-window W` tries it).
    - lookup_tokens: default length of the prompt-lookup chain verified beside the tree each round
      (generation/lookup.py), cut to what the node budget leaves after the tree; 0: none. The shipped
      SmolLM2 draft sets 32 (H200, bf16, 72 held-out prompts at 2k-8k: tau 9.3; 3.6 without it, in
      another run; docs/training.md), and so does every draft `hf-longspec train` makes. The class keeps
      0, as transformers keeps `prompt_lookup_num_tokens` off: a draft built by hand verifies its tree
      alone until its config or `longspec_lookup_tokens` asks for the chain.
    - cpu_tree_widths, cpu_lookup_tokens: what a call on a CPU drafts where it names none: the tree (None:
      tree_widths, and its ladder under a budget) and the chain length (None: lookup_tokens). On a CPU every
      verified row is arithmetic, so the GPU's wide tree runs slower than vanilla there
      (generation/tree_budget.py). Measuring tau (evaluation.measure_tau, benchmarks/tau_curve.py) drafts the
      draft's own tree and chain on every device. The shipped SmolLM2 draft and every draft
      `hf-longspec train` makes set [1, 1, 1] and 16 (docs/benchmarks.md, "The CPU's own round"); the
      class keeps None, as it keeps lookup_tokens 0.
    - cpu_tree_rerank_leaves: whether a call on a CPU re-ranks its tree's leaves where it names none (None:
      tree_rerank_leaves). The shipped draft's CPU round (1-1-1) has one leaf to re-rank, and re-ranking it
      ran 0.97x as fast (docs/training.md, forty-third session), so the shipped SmolLM2 draft and every draft
      `hf-longspec train` makes set False. Measuring tau re-ranks as tree_rerank_leaves says, on every device.
    - cpu_plain_steps: whether a call on a CPU may take plain one-token steps while they deliver more tokens per
      second than rounds (generation/plain_steps.py; ``longspec_plain_steps`` per call). On a CPU a round costs
      2-4 plain steps at 8k, so where the draft keeps missing, rounds are slower than not speculating. The
      shipped SmolLM2 draft sets True; the class keeps False, so a draft built by hand runs rounds only.
    """

    model_type = "longspec_draft"

    def __init__(
        self,
        vocab_size: int = 32000,
        hidden_size: int = 4096,
        intermediate_size: int = 14336,
        num_attention_heads: int = 32,
        num_key_value_heads: int | None = None,
        head_dim: int | None = None,
        hidden_act: str = "silu",
        rms_norm_eps: float = 1e-6,
        rope_parameters: dict | None = None,
        max_position_embeddings: int = 8192,
        attention_bias: bool = False,
        mlp_bias: bool = False,
        sliding_window: int = 512,
        target_layer_index: int = -1,
        extra_target_layer_indices: list[int] | tuple[int, ...] = (),
        target_num_hidden_layers: int | None = None,
        target_model_type: str | None = None,
        num_anchor_tokens: int = 4,
        tree_widths: list[int] | tuple[int, ...] = DEFAULT_TREE_WIDTHS,
        tree_max_nodes: int | None = None,
        tree_batch_nodes: int | None = 512,
        tree_ladder: list[list[int]] | tuple[tuple[int, ...], ...] = DEFAULT_TREE_LADDER,
        tree_rerank_leaves: bool = False,
        lookup_tokens: int = 0,
        cpu_tree_widths: list[int] | tuple[int, ...] | None = None,
        cpu_lookup_tokens: int | None = None,
        cpu_tree_rerank_leaves: bool | None = None,
        cpu_plain_steps: bool = False,
        cross_attention_length_scale: int | None = None,
        target_entry_input: bool = False,
        cross_attention_window: int | None = None,
        initializer_range: float = 0.02,
        **kwargs,
    ):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.num_attention_heads = num_attention_heads
        self.num_key_value_heads = num_key_value_heads or num_attention_heads
        self.head_dim = head_dim or hidden_size // num_attention_heads
        self.hidden_act = hidden_act
        self.rms_norm_eps = rms_norm_eps
        self.rope_parameters = dict(rope_parameters or {"rope_type": "default", "rope_theta": 10000.0})
        self.max_position_embeddings = max_position_embeddings
        self.attention_bias = attention_bias
        self.mlp_bias = mlp_bias
        self.sliding_window = int(sliding_window)
        self.target_layer_index = int(target_layer_index)
        extra = extra_target_layer_indices
        self.extra_target_layer_indices = list(extra) if isinstance(extra, (list, tuple)) else extra
        self.target_num_hidden_layers = target_num_hidden_layers
        self.target_model_type = target_model_type
        self.num_anchor_tokens = int(num_anchor_tokens)
        self.tree_widths = [int(w) for w in tree_widths]
        self.tree_max_nodes = tree_max_nodes
        self.tree_batch_nodes = tree_batch_nodes
        self.tree_ladder = [list(tree) for tree in tree_ladder or ()]  # None: no ladder
        self.tree_rerank_leaves = tree_rerank_leaves
        self.lookup_tokens = lookup_tokens
        self.cpu_tree_widths = list(cpu_tree_widths) if isinstance(cpu_tree_widths, (list, tuple)) else cpu_tree_widths
        self.cpu_lookup_tokens = cpu_lookup_tokens
        self.cpu_tree_rerank_leaves = cpu_tree_rerank_leaves
        self.cpu_plain_steps = cpu_plain_steps
        self.cross_attention_length_scale = cross_attention_length_scale
        self.target_entry_input = target_entry_input
        self.cross_attention_window = cross_attention_window
        self.initializer_range = initializer_range
        kwargs.setdefault("tie_word_embeddings", False)
        super().__init__(**kwargs)
        self._validate_longspec_fields()

    def _validate_longspec_fields(self) -> None:
        if self.sliding_window < 1:
            raise ValueError(f"sliding_window must be >= 1, got {self.sliding_window}")
        if not self.tree_widths or any(w < 1 for w in self.tree_widths):
            raise ValueError(f"tree_widths must be a non-empty list of positive ints, got {self.tree_widths}")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"num_attention_heads ({self.num_attention_heads}) must be a multiple of "
                f"num_key_value_heads ({self.num_key_value_heads})"
            )
        if self.tree_max_nodes is not None and (isinstance(self.tree_max_nodes, bool) or
                                                not isinstance(self.tree_max_nodes, int) or self.tree_max_nodes < 1):
            raise ValueError(f"tree_max_nodes must be a positive int or None (no cap), got {self.tree_max_nodes!r}")
        if self.tree_batch_nodes is not None and (isinstance(self.tree_batch_nodes, bool) or
                                                  not isinstance(self.tree_batch_nodes, int) or self.tree_batch_nodes < 1):
            raise ValueError(f"tree_batch_nodes must be a positive int or None (no cap), got {self.tree_batch_nodes!r}")
        if any(not tree or any(isinstance(w, bool) or not isinstance(w, int) or w < 1 for w in tree)
               for tree in self.tree_ladder):
            raise ValueError(f"tree_ladder must be a list of non-empty lists of positive ints (or None: no "
                             f"ladder), got {self.tree_ladder}")
        if not isinstance(self.tree_rerank_leaves, bool):
            raise ValueError(f"tree_rerank_leaves must be True or False (whether the tree's leaves are the best "
                             f"children of every drafted node), got {self.tree_rerank_leaves!r}")
        from .generation.lookup import MAX_LOOKUP_TOKENS, is_lookup_length

        if not is_lookup_length(self.lookup_tokens):
            raise ValueError(f"lookup_tokens must be an int from 0 to {MAX_LOOKUP_TOKENS} (0: no prompt-lookup "
                             f"chain), got {self.lookup_tokens!r}")
        cpu_tree = self.cpu_tree_widths
        if cpu_tree is not None and (not isinstance(cpu_tree, list) or not cpu_tree or
                                     any(isinstance(w, bool) or not isinstance(w, int) or w < 1 for w in cpu_tree)):
            raise ValueError(f"cpu_tree_widths must be None (tree_widths on a CPU too) or a non-empty list of positive "
                             f"ints, got {cpu_tree!r}")
        if self.cpu_lookup_tokens is not None and not is_lookup_length(self.cpu_lookup_tokens):
            raise ValueError(f"cpu_lookup_tokens must be None (lookup_tokens on a CPU too) or an int from 0 to "
                             f"{MAX_LOOKUP_TOKENS}, got {self.cpu_lookup_tokens!r}")
        if self.cpu_tree_rerank_leaves is not None and not isinstance(self.cpu_tree_rerank_leaves, bool):
            raise ValueError(f"cpu_tree_rerank_leaves must be None (tree_rerank_leaves on a CPU too), True or False, "
                             f"got {self.cpu_tree_rerank_leaves!r}")
        if not isinstance(self.cpu_plain_steps, bool):
            raise ValueError(f"cpu_plain_steps must be True or False (whether a call on a CPU may take plain steps "
                             f"where rounds lose), got {self.cpu_plain_steps!r}")
        scale = self.cross_attention_length_scale
        if scale is not None and (isinstance(scale, bool) or not isinstance(scale, int) or scale < 1):
            raise ValueError(f"cross_attention_length_scale must be None (off) or a positive int (the key count "
                             f"n0 at which the learned scaling is 1), got {scale!r}")
        if not isinstance(self.target_entry_input, bool):
            raise ValueError(f"target_entry_input must be True or False (whether the cross-attention also reads "
                             f"the newest target entry directly), got {self.target_entry_input!r}")
        extra = self.extra_target_layer_indices
        if (not isinstance(extra, list) or any(isinstance(i, bool) or not isinstance(i, int) for i in extra)
                or len(set(extra)) != len(extra)):
            raise ValueError(f"extra_target_layer_indices must be a list of distinct ints (target layers the "
                             f"cross-attention also reads; [] for none), got {extra!r}")
        self.check_layers_read_once()
        if extra and self.target_entry_input:
            raise ValueError("extra_target_layer_indices cannot be combined with target_entry_input=True (the newest "
                             "entry is read from one layer); allowed: one of the two")
        if self.num_anchor_tokens < 0:
            raise ValueError(f"num_anchor_tokens must be >= 0, got {self.num_anchor_tokens}")
        check_cross_attention_window(self.cross_attention_window)

    @classmethod
    def from_dict(cls, config_dict: dict, **kwargs):
        model_type = config_dict.get("model_type")
        if model_type not in (None, cls.model_type):
            raise NotADraftError(
                f"the config has model_type={model_type!r}: that is a {model_type} model, not a LongSpec draft "
                f"(model_type {cls.model_type!r}). Pass a draft folder written by `hf-longspec train` (its final/ "
                "folder) or LongSpecDraftModel.save_pretrained; load targets with AutoModelForCausalLM."
            )
        return super().from_dict(config_dict, **kwargs)

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *args, **kwargs):
        try:
            return super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)
        except NotADraftError as error:
            raise NotADraftError(f"{pretrained_model_name_or_path}: {error}") from None

    @property
    def resolved_target_layer_index(self) -> int:
        """The target layer index as a non-negative number (needs target_num_hidden_layers for -1)."""
        index = self.target_layer_index
        if index < 0:
            if self.target_num_hidden_layers is None:
                raise ValueError("target_layer_index < 0 needs target_num_hidden_layers to be known")
            index += self.target_num_hidden_layers
        return index

    def resolve_layer(self, index: int, num_layers: int | None = None) -> int:
        """`index` as a layer number >= 0 where the target's layer count (`num_layers`, by default
        target_num_hidden_layers) is known and `index` lies within it (-1 and the last layer's number name
        one layer); otherwise as given."""
        layers = num_layers or self.target_num_hidden_layers
        return index % layers if layers and -layers <= index < layers else index

    def check_layers_read_once(self, num_layers: int | None = None, error: type[ValueError] = ValueError) -> None:
        """Refuse (with `error`) a target layer named twice among target_layer_index and
        extra_target_layer_indices, as far as the layer count (`resolve_layer`) tells."""
        read = [self.resolve_layer(index, num_layers) for index in (self.target_layer_index,
                                                                     *self.extra_target_layer_indices)]
        if len(set(read)) != len(read):
            raise error(f"the draft would read target layers {read} (target_layer_index {self.target_layer_index}, "
                        f"extra_target_layer_indices {self.extra_target_layer_indices}) with one of them twice; "
                        "allowed: distinct layers (-1 and the last layer's number name the same one)")

    @property
    def resolved_target_layers(self) -> tuple[int, ...]:
        """Every target layer the cross-attention reads, as non-negative numbers: target_layer_index
        first, then extra_target_layer_indices (negative ones count from the end, as -1 does)."""
        layers = self.target_num_hidden_layers
        if any(index < 0 for index in self.extra_target_layer_indices) and layers is None:
            raise ValueError("a negative extra_target_layer_indices entry needs target_num_hidden_layers to be known")
        return (self.resolved_target_layer_index, *(self.resolve_layer(i) for i in self.extra_target_layer_indices))

    @classmethod
    def from_target_config(cls, target_config: PretrainedConfig, **overrides) -> "LongSpecDraftConfig":
        """Build a draft config whose shapes match `target_config`; `overrides` set LongSpec fields
        (intermediate_size among them: the MLP's width, by default the target's)."""
        from .target_support import check_supported_target_config, target_rope_parameters

        text_config = target_config.get_text_config() if hasattr(target_config, "get_text_config") else target_config
        check_supported_target_config(text_config)
        matched = {
            "hidden_size": text_config.hidden_size,
            "num_attention_heads": text_config.num_attention_heads,
            "num_key_value_heads": getattr(text_config, "num_key_value_heads", None)
            or text_config.num_attention_heads,
            "head_dim": getattr(text_config, "head_dim", None)
            or text_config.hidden_size // text_config.num_attention_heads,
            "intermediate_size": text_config.intermediate_size,
            "hidden_act": getattr(text_config, "hidden_act", "silu"),
            "rms_norm_eps": getattr(text_config, "rms_norm_eps", 1e-6),
            "rope_parameters": copy.deepcopy(target_rope_parameters(text_config)),
            "vocab_size": text_config.vocab_size,
            "max_position_embeddings": text_config.max_position_embeddings,
            "attention_bias": bool(getattr(text_config, "attention_bias", False)),
            "mlp_bias": bool(getattr(text_config, "mlp_bias", False)),
            "target_num_hidden_layers": text_config.num_hidden_layers,
            "target_model_type": text_config.model_type,
            "bos_token_id": getattr(text_config, "bos_token_id", None),
            "eos_token_id": getattr(text_config, "eos_token_id", None),
            "pad_token_id": getattr(text_config, "pad_token_id", None),
        }
        unknown = set(overrides) - set(cls().to_dict()) - {"torch_dtype", "dtype"}
        if unknown:
            raise TypeError(f"Unknown LongSpecDraftConfig fields: {sorted(unknown)}")
        clashing = set(overrides) & set(TARGET_MATCHED_FIELDS)
        if clashing:
            raise ValueError(
                f"{sorted(clashing)} must match the target and cannot be overridden; "
                "allowed overrides are LongSpec fields such as sliding_window, target_layer_index, tree_widths, "
                "intermediate_size"
            )
        return cls(**{**matched, **overrides})
