"""The LongSpec draft: one decoder layer that borrows everything else from the target.

    token -> target embedding (shared, frozen)
          -> sliding-window self-attention over the draft's own last `window` tokens (ring buffer)
          -> cross-attention whose keys/values ARE the target's KV cache of one layer (q, o only)
          -> MLP -> final norm -> target LM head (shared, frozen)

Two forward paths: `forward` trains on a whole sequence given the target layer's K/V
(Flash Noisy Training shifts what cross-attention may see), and `decode_step` drafts tree
nodes against the ring buffer and the live target cache.
"""

from __future__ import annotations

import functools

import warnings
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel
from transformers.activations import ACT2FN
from transformers.modeling_outputs import CausalLMOutput

from .configuration_longspec import TARGET_MATCHED_FIELDS, LongSpecDraftConfig, check_cross_attention_window
from .draft_state import DraftRingBuffer, DraftStepContext
from .errors import DraftNotRoutedError, IncompatibleDraftError, UnboundDraftError, UnsupportedTargetError
from .target_support import check_supported_target
from .tensor_parallel import HeadShard, check_shardable, target_head_shard


# Called with the target whenever a draft is bound. The decoding package registers its routing
# here, so this file never imports the decoding loop (data flows model -> round -> loop -> routing).
BIND_HOOKS: list = []


class LongSpecRMSNorm(nn.Module):
    def __init__(self, hidden_size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


def rope_inverse_frequencies(config: LongSpecDraftConfig) -> tuple[torch.Tensor, float]:
    """RoPE inverse frequencies and attention scaling, as the target computes them."""
    rope = config.rope_parameters
    rope_type = rope.get("rope_type", "default")
    if rope_type == "default":
        dim = config.head_dim
        return 1.0 / (rope["rope_theta"] ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim)), 1.0
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    return ROPE_INIT_FUNCTIONS[rope_type](config, None)


def _warn_if_target_rope_rounded(target) -> None:
    """A target cast with `.to(torch.bfloat16)` rounds its own RoPE frequencies (transformers keeps them in a
    plain buffer), so its cached keys carry other angles at long positions than the draft's exact ones:
    tau falls, the output stays exact. Loading the target with `dtype=` keeps them float32."""
    rotary = getattr(getattr(target, "model", None), "rotary_emb", None)
    frequencies = getattr(rotary, "inv_freq", None)
    if isinstance(frequencies, torch.Tensor) and frequencies.is_floating_point() and torch.finfo(frequencies.dtype).bits < 32:
        warnings.warn(
            f"the target's RoPE frequencies are {frequencies.dtype} (a .to() cast rounds them), so its keys at long "
            "positions are rotated by other angles than the draft expects: tau falls, the output stays exact. "
            f"Load the target with from_pretrained(..., dtype={frequencies.dtype}) instead of casting it.",
            stacklevel=3,
        )


class LongSpecRotaryEmbedding(nn.Module):
    """RoPE computed exactly like the target's, so draft queries meet the target's cached keys.

    inv_freq stays float32 and exact through any cast of the model (`draft.to(torch.bfloat16)`,
    `from_target` on a bf16 target): a bf16 frequency is off by up to 2**-9 of itself, which position
    8000 turns into radians, and the draft's queries would then miss the keys the target rotated in
    float32 (and a draft trained that way would meet other angles once reloaded)."""

    def __init__(self, config: LongSpecDraftConfig):
        super().__init__()
        self.config = config
        inv_freq, self.attention_scaling = rope_inverse_frequencies(config)
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def reset_buffers(self) -> None:
        """Recompute inv_freq (from_pretrained materializes non-persistent buffers uninitialized)."""
        inv_freq, self.attention_scaling = rope_inverse_frequencies(self.config)
        self.inv_freq = inv_freq.to(self.inv_freq.device)

    def _apply(self, fn, recurse=True):
        """Move with the model, but never take its dtype: the frequencies are recomputed in float32."""
        super()._apply(fn, recurse)
        if self.inv_freq.device.type != "meta":
            self.reset_buffers()
        return self

    @torch.no_grad()
    def forward(self, position_ids: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        freqs = position_ids[..., None].float() * self.inv_freq.to(device=position_ids.device, dtype=torch.float)
        emb = torch.cat((freqs, freqs), dim=-1)
        return (emb.cos() * self.attention_scaling).to(dtype), (emb.sin() * self.attention_scaling).to(dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x: (B, H, S, D); cos/sin: (B, S, D)."""
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return x * cos + rotate_half(x) * sin


def windowed_causal_mask(length: int, anchors: int, window: int, device) -> torch.Tensor:
    """(L, L) bool for the training path's shifted frame: query q reads key k <= q that is an anchor
    (k < anchors) or among the newest `window` (k > q - window), as decoding reads a committed cache."""
    query = torch.arange(length, device=device)[:, None]
    key = torch.arange(length, device=device)[None, :]
    return (key <= query) & ((key < anchors) | (key > query - window))


def attend(query, key, value, mask=None, is_causal=False, scale=None) -> torch.Tensor:
    """SDPA with grouped-query heads; (B, Hq, S, D) x (B, Hkv, K, D) -> (B, Hq, S, D)."""
    key, value = key.to(query.dtype), value.to(query.dtype)
    groups = query.shape[1] // key.shape[1]
    if groups > 1:
        key = key.repeat_interleave(groups, dim=1)
        value = value.repeat_interleave(groups, dim=1)
    return F.scaled_dot_product_attention(query, key, value, attn_mask=mask, is_causal=is_causal, scale=scale)


class LongSpecMLP(nn.Module):
    def __init__(self, config: LongSpecDraftConfig):
        super().__init__()
        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=config.mlp_bias)
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=config.mlp_bias)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=config.mlp_bias)
        self.act_fn = ACT2FN[config.hidden_act]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class LongSpecSelfAttention(nn.Module):
    """Sliding-window self-attention over the draft's own tokens."""

    def __init__(self, config: LongSpecDraftConfig):
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = config.num_key_value_heads
        self.head_dim = config.head_dim
        self.window = config.sliding_window
        h, d = config.hidden_size, config.head_dim
        self.q_proj = nn.Linear(h, self.num_heads * d, bias=config.attention_bias)
        self.k_proj = nn.Linear(h, self.num_kv_heads * d, bias=config.attention_bias)
        self.v_proj = nn.Linear(h, self.num_kv_heads * d, bias=config.attention_bias)
        self.o_proj = nn.Linear(self.num_heads * d, h, bias=False)

    def _heads(self, x: torch.Tensor, n: int) -> torch.Tensor:
        return x.view(*x.shape[:2], n, self.head_dim).transpose(1, 2)

    def project_kv(self, hidden: torch.Tensor, cos, sin) -> tuple[torch.Tensor, torch.Tensor]:
        """Post-RoPE K/V of normed inputs (B, S, h) -> (B, H_kv, S, D)."""
        keys = apply_rotary(self._heads(self.k_proj(hidden), self.num_kv_heads), cos, sin)
        return keys, self._heads(self.v_proj(hidden), self.num_kv_heads)

    def project_q(self, hidden: torch.Tensor, cos, sin) -> torch.Tensor:
        return apply_rotary(self._heads(self.q_proj(hidden), self.num_heads), cos, sin)

    def output(self, attn: torch.Tensor) -> torch.Tensor:
        return self.o_proj(attn.transpose(1, 2).reshape(attn.shape[0], attn.shape[2], -1))

    def forward_sequence(self, hidden: torch.Tensor, cos, sin, position_ids: torch.Tensor) -> torch.Tensor:
        """Training path: causal attention limited to keys less than `window` positions back."""
        query = self.project_q(hidden, cos, sin)
        keys, values = self.project_kv(hidden, cos, sin)
        seq = hidden.shape[1]
        causal = torch.ones(seq, seq, dtype=torch.bool, device=hidden.device).tril()
        distance = position_ids[:, :, None] - position_ids[:, None, :]
        mask = (causal & (distance < self.window))[:, None]
        return self.output(attend(query, keys, values, mask=mask))


class ZeroStartLinear(nn.Linear):
    """A projection that starts at zero (when built, and in `_init_weights`), so that it adds nothing
    until training moves it."""

    def reset_parameters(self) -> None:
        nn.init.zeros_(self.weight)
        if self.bias is not None:
            nn.init.zeros_(self.bias)


class LongSpecCrossAttention(nn.Module):
    """Queries from the draft, keys/values straight from the target's cache (no k/v projections).

    With several target layers (config.extra_target_layer_indices), layer l has its own block of
    query heads [l * H, (l + 1) * H): its rows of q_proj and columns of o_proj. Training passes the
    layers' K/V side by side on the head axis, which grouped-query attention maps onto those blocks;
    decoding runs each block over its layer's cache buffers, and o_proj sums them."""

    def __init__(self, config: LongSpecDraftConfig):
        super().__init__()
        self.num_layers = 1 + len(config.extra_target_layer_indices)
        self.heads_per_layer = config.num_attention_heads
        self.num_heads = config.num_attention_heads * self.num_layers  # over all layers read (self-attention's: one)
        self.head_dim = config.head_dim
        self.scaling = config.head_dim**-0.5
        self.q_proj = nn.Linear(config.hidden_size, self.num_heads * self.head_dim, bias=config.attention_bias)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, config.hidden_size, bias=False)
        # optional learned log-length temperature per head (config.cross_attention_length_scale)
        self.length_scale = config.cross_attention_length_scale
        self.length_gain = nn.Parameter(torch.zeros(self.num_heads)) if self.length_scale else None
        # optional direct read of the newest visible target entry (config.target_entry_input): its
        # un-rotated key and value, [k, v] per KV head, projected onto the output (zero at first)
        self.num_kv_heads = config.num_key_value_heads
        self.entry_proj = (ZeroStartLinear(2 * self.num_kv_heads * self.head_dim, config.hidden_size, bias=False)
                           if config.target_entry_input else None)
        self.config = config  # cross_attention_window is read at each call: setting it on the config takes effect

    def window(self, setting: int | str | None = "config") -> tuple[int, int] | None:
        """(anchors, newest entries) the queries read, or None: all of them. ``setting``: a window W, None (all),
        or "config": the config's cross_attention_window, read now."""
        window = self.config.cross_attention_window if setting == "config" else setting
        check_cross_attention_window(window)  # set on the config after it was built
        return None if window is None else (self.config.num_anchor_tokens, window)

    def scale_by_length(self, query: torch.Tensor, keys_read: torch.Tensor,
                        heads: tuple[int, int] | None = None) -> torch.Tensor:
        """query (B, H, S, D) times 1 + g_h ln(n / n0), n = keys_read (broadcast to (B, 1, S, 1)):
        how many target entries each query reads. Unchanged when the option is off."""
        if self.length_gain is None:
            return query
        gain = self.length_gain if heads is None else self.length_gain[heads[0] : heads[1]]
        log_ratio = torch.log(keys_read.clamp(min=1).to(torch.float32) / self.length_scale)
        return query * (1 + gain.float()[:, None, None] * log_ratio).to(query.dtype)

    def _head_features(self, heads: tuple[int, int]) -> slice:
        return slice(heads[0] * self.head_dim, heads[1] * self.head_dim)

    def project_q(self, hidden: torch.Tensor, cos, sin, heads: tuple[int, int] | None = None) -> torch.Tensor:
        """Queries (B, H, S, D) of all heads, or of the block ``heads`` = [start, stop) only (a
        tensor-parallel rank's: the rows of q_proj for those heads)."""
        if heads is None:
            q, count = self.q_proj(hidden), self.num_heads
        else:
            rows = self._head_features(heads)
            bias = self.q_proj.bias[rows] if self.q_proj.bias is not None else None
            q, count = F.linear(hidden, self.q_proj.weight[rows], bias), heads[1] - heads[0]
        return apply_rotary(q.view(*hidden.shape[:2], count, self.head_dim).transpose(1, 2), cos, sin)

    def output(self, attn: torch.Tensor, heads: tuple[int, int] | None = None) -> torch.Tensor:
        """o_proj of (B, H, S, D) attention outputs; for a head block, its columns of o_proj (a partial
        sum that the ranks add up)."""
        flat = attn.transpose(1, 2).reshape(attn.shape[0], attn.shape[2], -1).to(self.o_proj.weight.dtype)
        if heads is None:
            return self.o_proj(flat)
        return F.linear(flat, self.o_proj.weight[:, self._head_features(heads)])

    def newest_entry(self, target_keys: torch.Tensor, target_values: torch.Tensor, index: torch.Tensor,
                     cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """(B, S, 2 * H_kv * D): the target entry at cache index ``index`` (B, S) for each query, its key
        un-rotated by (cos, sin) of that entry's position (keys are cached post-RoPE; the projection
        should see content, not where it sits), [k, v] per KV head so a head block is contiguous.
        Un-rotated is what the target's k_proj (and k_norm, where it has one) gave, times the square of
        the RoPE attention scaling (1 for default RoPE); training and decoding read it alike."""
        gather = index[:, None, :, None].expand(-1, target_keys.shape[1], -1, target_keys.shape[-1])
        keys = apply_rotary(torch.gather(target_keys, 2, gather).to(cos.dtype), cos, -sin)
        values = torch.gather(target_values, 2, gather).to(cos.dtype)
        return torch.cat([keys, values], dim=-1).transpose(1, 2).flatten(2)

    def entry_output(self, entry: torch.Tensor, kv_heads: tuple[int, int] | None = None) -> torch.Tensor:
        """entry_proj of `newest_entry` features; for a tensor-parallel rank's KV head block, its
        columns (a partial sum, added to the attention's before the all-reduce)."""
        weight = self.entry_proj.weight
        if kv_heads is not None:
            weight = weight[:, 2 * kv_heads[0] * self.head_dim : 2 * kv_heads[1] * self.head_dim]
        return F.linear(entry.to(weight.dtype), weight)

    def forward_sequence(self, hidden, cos, sin, target_keys, target_values, shift: int,
                         position_ids: torch.Tensor | None = None, rotary=None) -> torch.Tensor:
        """Training path (Flash Noisy Training): query i sees target K/V j <= i - shift.

        Dropping the last `shift` keys and the first `shift` queries turns that into plain
        causal attention, so flash kernels apply; the first `shift` outputs are zero. With
        ``entry_proj``, query i also reads entry i - shift directly (position_ids and the rotary
        embedding give that entry's position, to un-rotate its key).
        """
        query = self.project_q(hidden, cos, sin)
        seq = hidden.shape[1]
        out = query.new_zeros(query.shape)
        if shift < seq:
            visible = None if self.window() is None else windowed_causal_mask(seq - shift, *self.window(), query.device)
            keys_read = (torch.arange(1, seq - shift + 1, device=query.device) if visible is None
                         else visible.sum(-1))[None, None, :, None]
            out[:, :, shift:] = attend(
                self.scale_by_length(query[:, :, shift:], keys_read),
                target_keys[:, :, : seq - shift],
                target_values[:, :, : seq - shift],
                mask=visible,
                is_causal=visible is None,
                scale=self.scaling,
            )
        out = self.output(out)
        if self.entry_proj is not None and shift < seq:
            if position_ids is None or rotary is None:
                raise ValueError("target_entry_input: forward_sequence needs position_ids and the rotary embedding "
                                 "(to un-rotate the newest entry's key); LongSpecDraftModel.forward passes both")
            index = torch.arange(seq - shift, device=query.device)[None].expand(hidden.shape[0], -1)
            entry_cos, entry_sin = rotary(position_ids[:, : seq - shift], cos.dtype)
            entry = self.newest_entry(target_keys, target_values, index, entry_cos, entry_sin)
            out = torch.cat([out[:, :shift], out[:, shift:] + self.entry_output(entry)], dim=1)
        return out

    def layer_heads(self, layer: int, shard: HeadShard | None = None) -> tuple[int, int] | None:
        """The query heads [start, stop) that read target layer number `layer` of the ones the draft reads
        (0 = target_layer_index), within a tensor-parallel rank's share when ``shard`` is given; None:
        all heads (one layer, no shard)."""
        if self.num_layers == 1:
            return shard.head_range(self.num_heads) if shard is not None else None
        start, stop = shard.head_range(self.heads_per_layer) if shard is not None else (0, self.heads_per_layer)
        base = layer * self.heads_per_layer
        return base + start, base + stop

    def forward_step(self, hidden, cos, sin, target_keys, target_values, target_lengths,
                     shard: HeadShard | None = None, newest_entry: torch.Tensor | None = None,
                     extra_kv: tuple = (), window: int | str | None = "config") -> torch.Tensor:
        """Decoding path: every drafted node sees the committed entries [0, target_lengths[b]) of the
        target's preallocated cache buffers (B, H_kv, C, D); the lengths stay on the device.
        ``extra_kv``: the (keys, values) buffers of the extra target layers, in config order.

        With a tensor-parallel target (``shard``), the buffers hold this rank's KV heads only: compute
        just the query heads that read them and all-reduce the partial ``o_proj`` outputs.
        ``newest_entry``: `newest_entry` of the last committed entry, with ``entry_proj`` only.
        ``window``: the entries read (`window`'s setting; a decoder passes the call's)."""
        from .attention.prefix import grouped_prefix_attention_varlen, grouped_prefix_attention_window

        layers = ((target_keys, target_values), *extra_kv)
        window = self.window(window)
        read = grouped_prefix_attention_varlen if window is None else functools.partial(
            grouped_prefix_attention_window, anchors=window[0], newest=window[1])
        lengths = target_lengths if window is None else target_lengths.clamp(max=sum(window))
        lengths = lengths[:, None, None, None]  # the entries each query reads (the length scaling's n)
        if shard is None:  # every block's heads at once: one projection in, one out
            query = self.scale_by_length(self.project_q(hidden, cos, sin), lengths)
            blocks = query.split(self.heads_per_layer, dim=1) if len(layers) > 1 else (query,)
            attended = [read(block.to(keys.dtype), keys, values, target_lengths, self.scaling)[0].flatten(1, 2)
                        for block, (keys, values) in zip(blocks, layers)]
            out = self.output(torch.cat(attended, dim=1) if len(attended) > 1 else attended[0])
        else:  # a rank's heads of each block are not contiguous: a partial o_proj sum per block
            parts = []
            for layer, (keys, values) in enumerate(layers):
                heads = self.layer_heads(layer, shard)
                query = self.scale_by_length(self.project_q(hidden, cos, sin, heads), lengths, heads).to(keys.dtype)
                attended, _ = read(query, keys, values, target_lengths, self.scaling)
                parts.append(self.output(attended.flatten(1, 2), heads))
            out = parts[0] if len(parts) == 1 else torch.stack(parts).sum(dim=0)
        if self.entry_proj is not None:  # every node reads the last committed entry, as the tree's root does
            if newest_entry is None:
                raise ValueError("target_entry_input: forward_step needs newest_entry (the last committed entry's "
                                 "features, LongSpecDraftModel._newest_committed_entry); decode_step passes it")
            out = out + self.entry_output(newest_entry, shard.head_range(self.num_kv_heads) if shard else None)
        return shard.all_reduce(out) if shard is not None else out


class LongSpecPreTrainedModel(PreTrainedModel):
    config_class = LongSpecDraftConfig
    base_model_prefix = "longspec"
    main_input_name = "input_ids"
    accepts_loss_kwargs = False
    _supports_sdpa = True

    def _init_weights(self, module):
        std = self.config.initializer_range
        if isinstance(module, ZeroStartLinear):  # reads nothing at first: the plain cross-attention
            module.reset_parameters()
        elif isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, LongSpecRMSNorm):
            nn.init.ones_(module.weight)
        elif isinstance(module, LongSpecCrossAttention) and module.length_gain is not None:
            nn.init.zeros_(module.length_gain)  # scaling 1 at every length: the plain cross-attention
        elif isinstance(module, LongSpecRotaryEmbedding):
            module.reset_buffers()


class LongSpecDraftModel(LongSpecPreTrainedModel):
    """One-layer LongSpec draft. Bind it to its target (`from_target` or `bind`) before use."""

    def __init__(self, config: LongSpecDraftConfig):
        super().__init__(config)
        self.input_layernorm = LongSpecRMSNorm(config.hidden_size, config.rms_norm_eps)
        self.self_attn = LongSpecSelfAttention(config)
        self.cross_attn_layernorm = LongSpecRMSNorm(config.hidden_size, config.rms_norm_eps)
        self.cross_attn = LongSpecCrossAttention(config)
        self.post_attention_layernorm = LongSpecRMSNorm(config.hidden_size, config.rms_norm_eps)
        self.mlp = LongSpecMLP(config)
        self.norm = LongSpecRMSNorm(config.hidden_size, config.rms_norm_eps)
        self.rotary_emb = LongSpecRotaryEmbedding(config)
        self._bound_target = None  # a plain tuple, never a submodule: target weights stay out of state_dict
        self._head_shard = None  # set by bind() for a tensor-parallel target: this rank's heads
        self.last_stats = None
        self.post_init()

    # ----------------------------------------------------------------- binding
    @classmethod
    def from_target(cls, target, **overrides) -> "LongSpecDraftModel":
        """A new (untrained) draft shaped after `target` and bound to it."""
        check_supported_target(target)
        config = LongSpecDraftConfig.from_target_config(target.config, **overrides)
        reference = target.get_input_embeddings().weight
        with torch.device(reference.device):  # initialize where it will run (an 8B target's draft is ~250M)
            draft = cls(config)
        draft = draft.to(dtype=reference.dtype)
        final_norm = getattr(getattr(target, "model", None), "norm", None)
        if final_norm is not None and final_norm.weight.shape == draft.norm.weight.shape:
            with torch.no_grad():  # start from the target's output scale: the LM head is trained for it
                draft.norm.weight.copy_(final_norm.weight)
        return draft.bind(target)

    def bind(self, target) -> "LongSpecDraftModel":
        """Share `target`'s embeddings, LM head and KV cache; checks that the shapes agree."""
        check_supported_target(target)
        target_config = target.config.get_text_config()
        self._check_matches(target_config)
        if target.get_input_embeddings().weight.shape[0] != self.config.vocab_size:
            raise IncompatibleDraftError(
                f"vocab size mismatch: draft has {self.config.vocab_size}, target embedding has "
                f"{target.get_input_embeddings().weight.shape[0]} rows"
            )
        self._check_device(target)
        _warn_if_target_rope_rounded(target)
        layers = target_config.num_hidden_layers
        if not -layers <= self.config.target_layer_index < layers:
            raise IncompatibleDraftError(
                f"target_layer_index {self.config.target_layer_index} is outside the target's {layers} layers "
                f"(allowed: {-layers}..{layers - 1})"
            )
        outside = [index for index in self.config.extra_target_layer_indices if not -layers <= index < layers]
        if outside:
            raise IncompatibleDraftError(
                f"extra_target_layer_indices {outside} are outside the target's {layers} layers "
                f"(allowed: {-layers}..{layers - 1})"
            )
        self.config.check_layers_read_once(layers, IncompatibleDraftError)
        shard = target_head_shard(target)
        if shard is not None:
            check_shardable(target_config, shard)
        self.config.target_num_hidden_layers = layers
        self._bound_target = (target,)
        self._head_shard = shard
        for hook in BIND_HOOKS:  # e.g. generation.routing: makes target.generate route this draft
            hook(target)
        return self

    def _check_device(self, target) -> None:
        """The draft runs on the target's embedding device: refuse a draft elsewhere now, not deep in a forward."""
        target_device = target.get_input_embeddings().weight.device
        draft_devices = sorted({str(p.device) for p in self.parameters()})
        if draft_devices != [str(target_device)]:
            where = draft_devices[0] if len(draft_devices) == 1 else "spread over " + ", ".join(draft_devices)
            raise IncompatibleDraftError(
                f"device mismatch: the draft's weights are on {where}, the target's embeddings are on {target_device}. "
                "Allowed: the draft on the target's device; move it first: "
                f"draft.to({str(target_device)!r}).bind(target)."
            )

    def _check_matches(self, target_config) -> None:
        draft_as_target = LongSpecDraftConfig.from_target_config(target_config)
        mismatches = []
        for field in TARGET_MATCHED_FIELDS:
            mine, theirs = getattr(self.config, field), getattr(draft_as_target, field)
            if field == "rope_parameters":
                mine, theirs = _comparable_rope(mine), _comparable_rope(theirs)
            if mine != theirs:
                mismatches.append(f"{field}: draft has {mine!r}, target has {theirs!r}")
        if mismatches:
            raise IncompatibleDraftError(
                "draft/target mismatch in " + "; ".join(mismatches)
                + ". A draft only works with a target of the same shape (train one with `hf-longspec train`)."
            )

    @property
    def target(self):
        if self._bound_target is None:
            raise UnboundDraftError(
                "This LongSpec draft is not bound to a target; call draft.bind(target) "
                "(or LongSpecDraftModel.from_target(target)) first."
            )
        return self._bound_target[0]

    @property
    def is_bound(self) -> bool:
        return self._bound_target is not None

    @property
    def target_layer_index(self) -> int:
        return self.config.resolved_target_layer_index

    @property
    def target_layers(self) -> tuple[int, ...]:
        """Every target layer whose K/V the cross-attention reads: target_layer_index, then the extra ones."""
        return self.config.resolved_target_layers

    def __getattr__(self, name: str):
        if name == "generation_config":
            # Only stock assisted generation asks a draft for this: the caller's model never got
            # LongSpec routing, i.e. the draft is not bound to it.
            bound = self.__dict__.get("_bound_target")
            bound = type(bound[0]).__name__ if bound else "no model"
            raise DraftNotRoutedError(
                f"This LongSpec draft is bound to {bound}, not to the model whose generate() received it; "
                "bind it first with draft.bind(model), then call model.generate(..., assistant_model=draft)."
            )
        return super().__getattr__(name)

    def get_input_embeddings(self):
        return self._bound_target[0].get_input_embeddings() if self._bound_target else None

    def get_output_embeddings(self):
        return None  # the LM head belongs to the target; never tie or resize it from here

    def _embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.target.get_input_embeddings()(input_ids).to(self.norm.weight.dtype)

    def _logits(self, hidden: torch.Tensor) -> torch.Tensor:
        lm_head = self.target.get_output_embeddings()
        return lm_head(self.norm(hidden).to(lm_head.weight.dtype))

    # ---------------------------------------------------------------- training
    def forward(
        self,
        input_ids: torch.LongTensor,
        target_keys: torch.Tensor,
        target_values: torch.Tensor,
        position_ids: torch.LongTensor | None = None,
        noise_shift: int = 1,
        labels: torch.LongTensor | None = None,
        rollout_steps: int = 1,
        rollout_decay: float = 0.8,
        **kwargs,
    ) -> CausalLMOutput:
        """Whole-sequence forward for training.

        target_keys/values: (B, H_kv, S, D) of target layer `target_layer_index` computed with the
        same position_ids; with extra_target_layer_indices, (B, L * H_kv, S, D): the L layers of
        `target_layers` side by side on the head axis, in that order (`target_support.target_layers_kv`).
        noise_shift d >= 1: position i may read target K/V only up to i - d, as at inference where the
        newest 1..depth+1 entries are not verified yet.
        labels follow the transformers convention (unshifted; -100 = ignore), or are (B, S, vocab)
        probabilities of each token (soft labels, `_next_token_loss`).
        rollout_steps K > 1: also train on the draft's own predictions (`_rollout`); the loss is
        the decay-weighted mean of the K steps' losses. K = 1 is the teacher-forced forward alone.
        """
        if self._head_shard is not None:
            raise UnsupportedTargetError(
                "Training reads the target layers' full KV heads; this draft is bound to a tensor-parallel target "
                f"(tp_size={self._head_shard.world_size}). Train against a target whole on each device "
                "(data parallel or FSDP over the draft)."
            )
        batch, seq = input_ids.shape
        expected_heads = self.config.num_key_value_heads * self.cross_attn.num_layers
        if target_keys.shape[1] != expected_heads:
            raise ValueError(
                f"target_keys has {target_keys.shape[1]} heads; this draft reads target layers {list(self.target_layers)} "
                f"of {self.config.num_key_value_heads} KV heads each, so allowed: {expected_heads} heads "
                "(the layers side by side, target_support.target_layers_kv)"
            )
        if position_ids is None:
            position_ids = torch.arange(seq, device=input_ids.device)[None].expand(batch, -1)
        if rollout_steps > 1:
            return self._rollout(input_ids, target_keys, target_values, position_ids, noise_shift, labels,
                                 rollout_steps, rollout_decay)
        hidden = self._embed(input_ids)
        cos, sin = self.rotary_emb(position_ids, hidden.dtype)
        hidden = hidden + self.self_attn.forward_sequence(self.input_layernorm(hidden), cos, sin, position_ids)
        logits = self._cross_attention_mlp_logits(hidden, cos, sin, target_keys, target_values, noise_shift,
                                                  position_ids)
        loss = _next_token_loss(logits, labels) if labels is not None else None
        return CausalLMOutput(loss=loss, logits=logits)

    def _cross_attention_mlp_logits(self, hidden, cos, sin, target_keys, target_values, shift: int,
                                    position_ids: torch.Tensor) -> torch.Tensor:
        """The rest of the layer after self-attention, through the target's LM head."""
        return self._logits(self._cross_attention_mlp(hidden, cos, sin, target_keys, target_values, shift, position_ids))

    def _cross_attention_mlp(self, hidden, cos, sin, target_keys, target_values, shift: int,
                             position_ids: torch.Tensor) -> torch.Tensor:
        """The layer's cross-attention and MLP blocks (training path): its output hidden states."""
        hidden = hidden + self.cross_attn.forward_sequence(
            self.cross_attn_layernorm(hidden), cos, sin, target_keys, target_values, shift, position_ids, self.rotary_emb
        )
        return hidden + self.mlp(self.post_attention_layernorm(hidden))

    def _rollout(self, input_ids, target_keys, target_values, position_ids, noise_shift: int, labels,
                 steps: int, decay: float) -> "LongSpecTrainingOutput":
        """Multi-step rollout (EAGLE-3's training-time test), exact for greedy chains.

        Step 1 is the teacher-forced forward. Step k >= 2 stands for tree depth k: its input at
        position i is the draft's argmax of step k-1 at position i-1 (detached), so the chain ending
        at (k, i) is rooted at the real token i-k+1 and holds k-1 draft tokens i-k+2..i, as a
        depth-k node's ancestors do at inference. Self-attention sees exactly that: real tokens up
        to the root and, at each later position j, the K/V of the step that put its token there
        (`rollout_self_attention_mask` over the K/V of steps 1..k; a token's K/V depend on the
        token and its position only, so they are the ones decoding would have).
        Cross-attention sees what the chain's root saw: shift noise_shift + k - 1, so every step of
        one chain reads the same committed target K/V, as every node of one tree does.
        Labels are the same at every step; the loss is sum_k decay^(k-1) L_k / sum_k decay^(k-1).
        """
        cos, sin = self.rotary_emb(position_ids, self.norm.weight.dtype)
        tokens = input_ids
        step_keys, step_values, step_logits, step_losses = [], [], [], []
        for step in range(1, steps + 1):
            hidden = self._embed(tokens)
            normed = self.input_layernorm(hidden)
            keys, values = self.self_attn.project_kv(normed, cos, sin)
            step_keys.append(keys)
            step_values.append(values)
            mask = rollout_self_attention_mask(position_ids, step, self.config.sliding_window)
            attention = attend(self.self_attn.project_q(normed, cos, sin), torch.cat(step_keys, dim=2),
                               torch.cat(step_values, dim=2), mask=mask[:, None])
            hidden = hidden + self.self_attn.output(attention)
            logits = self._cross_attention_mlp_logits(hidden, cos, sin, target_keys, target_values,
                                                      noise_shift + step - 1, position_ids)
            step_logits.append(logits)
            if labels is not None:
                step_losses.append(_next_token_loss(logits, labels))
            # the next depth's input at i is this step's guess for position i; position 0 has no
            # guess and keeps its real token (a chain rooted at the sequence start)
            tokens = torch.cat([input_ids[:, :1], logits[:, :-1].argmax(dim=-1)], dim=1).detach()
        loss = None
        if labels is not None:
            weights = [decay ** (step - 1) for step in range(1, steps + 1)]
            loss = sum(w * step_loss for w, step_loss in zip(weights, step_losses)) / sum(weights)
            step_losses = torch.stack([step_loss.detach() for step_loss in step_losses])
        return LongSpecTrainingOutput(loss=loss, logits=step_logits[0], step_logits=tuple(step_logits),
                                      step_losses=step_losses if labels is not None else None)

    # ---------------------------------------------------------------- decoding
    def new_ring_buffer(self, batch_size: int = 1) -> DraftRingBuffer:
        p = self.norm.weight
        return DraftRingBuffer.empty(
            batch_size, self.config.num_key_value_heads, self.config.sliding_window, self.config.head_dim, p.dtype, p.device
        )

    def token_kv(self, token_ids: torch.Tensor, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Self-attention K/V of tokens at positions: they depend on nothing else."""
        hidden = self.input_layernorm(self._embed(token_ids))
        cos, sin = self.rotary_emb(position_ids, hidden.dtype)
        return self.self_attn.project_kv(hidden, cos, sin)

    @torch.no_grad()
    def commit(self, ring: DraftRingBuffer, token_ids: torch.Tensor, position_ids: torch.Tensor,
               valid: torch.Tensor | None = None) -> None:
        """Record committed tokens (B, N) at consecutive absolute positions (B, N) in the ring buffer;
        entries where ``valid`` (B, N) is False are skipped. Device ops only (graph-safe)."""
        keep = min(token_ids.shape[1], ring.window)
        token_ids, position_ids = token_ids[:, -keep:], position_ids[:, -keep:]
        valid = valid[:, -keep:] if valid is not None else None
        keys, values = self.token_kv(token_ids, position_ids)
        ring.write(keys, values, position_ids, valid)

    @torch.no_grad()
    def start(self, input_ids: torch.Tensor, ring: DraftRingBuffer | None = None,
              starts: torch.Tensor | None = None) -> DraftRingBuffer:
        """A ring buffer (fresh, or ``ring`` cleared in place) holding each row's last `window` prompt
        tokens; nothing else is run. ``starts`` (B,): left padding per row; padding never enters
        the ring, and row b's first real token sits at position 0."""
        ring = ring if ring is not None else self.new_ring_buffer(input_ids.shape[0])
        ring.clear()
        batch, seq = input_ids.shape
        keep = min(seq, ring.window)
        lengths = seq - (starts if starts is not None else torch.zeros(batch, dtype=torch.long, device=input_ids.device))
        positions = lengths[:, None] - keep + torch.arange(keep, device=input_ids.device)[None]
        self.commit(ring, input_ids[:, -keep:], positions, valid=positions >= 0)
        return ring

    @torch.no_grad()
    def decode_step(
        self,
        context: DraftStepContext,
        token_ids: torch.Tensor,
        position_ids: torch.Tensor,
        slot: int,
        tree_mask: torch.Tensor,
    ) -> tuple[torch.Tensor]:
        """Run N tree nodes (B, N) at absolute positions (B, N) through the draft.

        Their self-attention K/V are written to the round's tree buffers at slots
        [slot, slot + N). Self-attention sees the ring buffer (window-limited) plus the tree slots
        allowed by tree_mask (B, N, N_run) (ancestors and itself); cross-attention sees the
        committed target cache of each layer it reads. Returns (logits (B, N, V),). Device ops only.
        """
        hidden = self._embed(token_ids)
        cos, sin = self.rotary_emb(position_ids, hidden.dtype)
        normed = self.input_layernorm(hidden)
        query = self.self_attn.project_q(normed, cos, sin)
        new_keys, new_values = self.self_attn.project_kv(normed, cos, sin)
        count = token_ids.shape[1]
        context.tree_keys[:, :, slot : slot + count] = new_keys
        context.tree_values[:, :, slot : slot + count] = new_values
        ring = context.ring
        keys = torch.cat([ring.keys, context.tree_keys], dim=2)
        values = torch.cat([ring.values, context.tree_values], dim=2)
        mask = torch.cat([ring.visibility(position_ids), tree_mask], dim=2)[:, None]
        hidden = hidden + self.self_attn.output(attend(query, keys, values, mask=mask))
        hidden = hidden + self.cross_attn.forward_step(
            self.cross_attn_layernorm(hidden), cos, sin, context.target_keys, context.target_values,
            context.target_lengths, self._head_shard, self._newest_committed_entry(context, count),
            extra_kv=context.extra_target_kv, window=context.cross_attention_window,
        )
        hidden = hidden + self.mlp(self.post_attention_layernorm(hidden))
        return (self._logits(hidden),)

    def _newest_committed_entry(self, context: DraftStepContext, count: int) -> torch.Tensor | None:
        """The last committed target entry of each row (cache index = position target_lengths - 1; the
        decoder's rows start at 0), as `newest_entry` features for `count` nodes; None without entry_proj."""
        if self.cross_attn.entry_proj is None:
            return None
        index = (context.target_lengths - 1).clamp(min=0)[:, None]
        cos, sin = self.rotary_emb(index, self.norm.weight.dtype)
        entry = self.cross_attn.newest_entry(context.target_keys, context.target_values, index, cos, sin)
        committed = (context.target_lengths > 0).to(entry.dtype)[:, None, None]  # no entry yet: read nothing
        return (entry * committed).expand(-1, count, -1)


def _comparable_rope(params: dict) -> dict:
    """RoPE dicts compare by value; float rounding from JSON round trips is ignored."""
    return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in sorted(dict(params).items())}


def _next_token_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of position i's logits against labels[i + 1] (labels unshifted). Token ids
    (B, S), -100 = ignore; or probabilities (B, S, vocab), the target's whole next-token
    distribution (soft labels: the forward KL to the target plus its entropy, a constant)."""
    vocab = logits.shape[-1]
    if labels.is_floating_point():
        return F.cross_entropy(logits[:, :-1].reshape(-1, vocab).float(), labels[:, 1:].reshape(-1, vocab).float())
    return F.cross_entropy(logits[:, :-1].reshape(-1, vocab).float(), labels[:, 1:].reshape(-1), ignore_index=-100)


def rollout_self_attention_mask(position_ids: torch.Tensor, step: int, window: int) -> torch.Tensor:
    """(B, S, step * S) bool: which self-attention keys rollout step `step` may read.

    Keys are the K/V of steps 1..step side by side (block s = the tokens step s was fed). Query i
    of step k belongs to the chain rooted at the real token r = i - k + 1: it sees the real tokens
    j <= r (block 1: the ring buffer and the root at inference) and, for s = 2..k, exactly the token
    at position i - k + s of block s (its drafted ancestors and itself: the tree slots). Every key
    obeys the sliding window by position, as in the teacher-forced forward; at inference the tree
    slots are never windowed, which is the same thing while steps <= window. Step 1 is the plain
    causal window mask.
    """
    batch, seq = position_ids.shape
    device = position_ids.device
    query = torch.arange(seq, device=device)[:, None]
    key = torch.arange(seq, device=device)[None, :]
    root = query - step + 1
    near = (position_ids[:, :, None] - position_ids[:, None, :]) < window
    blocks = [(key <= root) & near] + [(key == root + s - 1) & near for s in range(2, step + 1)]
    return torch.cat(blocks, dim=2)


@dataclass
class LongSpecTrainingOutput(CausalLMOutput):
    """A rollout forward's output: `logits` of step 1 (teacher-forced), every step's logits and
    (with labels) every step's loss, detached, for logging."""

    step_logits: tuple[torch.Tensor, ...] | None = None
    step_losses: torch.Tensor | None = None


__all__ = ["LongSpecDraftModel", "LongSpecPreTrainedModel", "LongSpecTrainingOutput", "UnsupportedTargetError"]
