"""LongSpec lossless tree speculative decoding for plain transformers.

    model.generate(input_ids, custom_generate="<this repo>", trust_remote_code=True, max_new_tokens=256)

The repository root holds the LongSpec draft (config.json + model.safetensors) trained for the
target `model`; this loads it once, binds it to `model` and runs hf-longspec's tree speculation.
Output equals the model's own decoding (greedy: identical tokens). Options: draft_path=<repo id or
folder> or longspec_draft=<LongSpecDraftModel> for another draft; longspec_tree_widths=[4, 16, 16],
longspec_max_nodes=N. Needs `pip install hf-longspec`.
"""

import hf_longspec  # noqa: F401 - registers the draft with transformers' Auto classes
from hf_longspec.publishing.custom_generate_runtime import generate_with_repo_draft


def generate(model, *args, **kwargs):
    return generate_with_repo_draft(model, *args, code_file=__file__, **kwargs)
