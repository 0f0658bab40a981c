"""An oracle draft for tests: it proposes the target's own next-token distribution.

It runs the target itself on each node's path (appended to the live cache, then cropped
away), so a greedy chain is always fully accepted: tau must reach depth + 1.
"""

import torch

from hf_longspec import LongSpecDraftModel
from hf_longspec.target_support import cache_argument_name


class OracleDraft(LongSpecDraftModel):
    sharpness = 1.0  # logits scale: 1.0 = exactly the target's distribution

    @torch.no_grad()
    def decode_step(self, ring, token_ids, position_ids, tree_keys, tree_values, tree_mask, target_cache):
        if tree_keys is None:  # a new round starts at the root
            self._round_tokens = []
        self._round_tokens += token_ids[0].tolist()
        first = len(self._round_tokens) - token_ids.shape[1]
        target = self.target
        logits = []
        for row in range(token_ids.shape[1]):
            path = [self._round_tokens[i] for i in torch.nonzero(tree_mask[0, row]).flatten().tolist()]
            assert path[-1] == self._round_tokens[first + row]
            length = target_cache.get_seq_length()
            positions = torch.arange(length, length + len(path), device=token_ids.device)[None]
            out = target(
                input_ids=torch.tensor([path], device=token_ids.device), position_ids=positions, logits_to_keep=1,
                use_cache=True, **{cache_argument_name(target): target_cache},
            )
            target_cache.crop(-len(path))
            logits.append(out.logits[0, -1].float() * self.sharpness)
        kv_shape = (1, self.config.num_key_value_heads, token_ids.shape[1], self.config.head_dim)
        empty = torch.zeros(kv_shape, dtype=self.norm.weight.dtype, device=token_ids.device)
        return torch.stack(logits)[None], empty, empty.clone()
