"""What a custom_generate repo's generate.py runs: find the repo's draft, bind it, speculate.

transformers loads `custom_generate/generate.py` (copied into its modules cache) and calls
`generate(model=..., <every generate() argument>)`. It does not say which repository the code
came from, so the draft's location is read from the calling `generate()` frame (its
`custom_generate` argument: the repo id or local folder); `draft_path=` or `longspec_draft=`
skip that lookup.
"""

from __future__ import annotations

import inspect
import os
import re
from pathlib import Path

from ..errors import UnsupportedGenerationError

_COMMIT = re.compile(r"[0-9a-f]{40}")
_FRAMES_TO_SEARCH = 16
# On the target, as a plain dict: not a submodule (stays out of its state_dict), freed with it.
_LOADED_DRAFTS_ATTRIBUTE = "_longspec_repo_drafts"


def generate_with_repo_draft(model, *args, code_file=None, longspec_draft=None, draft_path=None, **kwargs):
    """`model.generate(*args, **kwargs)` with LongSpec tree speculation and the repo's draft.

    code_file: the calling generate.py (its path in transformers' modules cache pins the Hub commit).
    """
    from ..generation import longspec_generate
    from ..modeling_longspec import LongSpecDraftModel

    assistant = kwargs.pop("assistant_model", None)
    if assistant is not None and not isinstance(assistant, LongSpecDraftModel):
        raise UnsupportedGenerationError(
            f"custom_generate LongSpec brings its own draft; assistant_model={type(assistant).__name__} "
            "cannot be used with it."
        )
    draft = longspec_draft if longspec_draft is not None else assistant
    if draft is None:
        source, revision = (str(draft_path), None) if draft_path is not None else _calling_repo(model, code_file)
        draft = _load_bound_draft(model, source, revision)
    elif not draft.is_bound or draft.target is not model:
        draft.bind(model)
    streamer = kwargs.pop("streamer", None)
    # The class's generate, not model.generate: an instance-level custom generate would call us again.
    return type(model).generate(
        model, *args, custom_generate=longspec_generate, longspec_draft=draft, longspec_streamer=streamer, **kwargs
    )


def _calling_repo(model, code_file) -> tuple[str, str | None]:
    """(repo id or folder, Hub commit or None) that transformers loaded this custom_generate from."""
    frame = inspect.currentframe()
    try:
        for _ in range(_FRAMES_TO_SEARCH):
            frame = frame.f_back if frame is not None else None
            if frame is None:
                break
            names = frame.f_locals
            source = names.get("custom_generate")
            called_by_generate = frame.f_code.co_name == "generate" and names.get("self") is model
            if called_by_generate and isinstance(source, (str, os.PathLike)):
                return str(source), _pinned_commit(str(source), code_file)
    finally:
        del frame
    raise UnsupportedGenerationError(
        "Cannot tell which repository this custom_generate code came from (it was not called by "
        "model.generate(custom_generate=...)); pass draft_path='<owner/repo or folder>' or longspec_draft=<draft>."
    )


def _pinned_commit(source: str, code_file) -> str | None:
    """For a Hub repo, the commit generate.py was loaded from (transformers keeps it in the cached path)."""
    if code_file is None or os.path.isdir(source):
        return None
    commit = Path(code_file).resolve().parent.parent.name  # .../<commit>/custom_generate/generate.py
    return commit if _COMMIT.fullmatch(commit) else None


def _load_bound_draft(model, source: str, revision: str | None):
    """The draft of `source`, in the target's dtype and device, bound to it; loaded once per target."""
    from ..modeling_longspec import LongSpecDraftModel

    loaded = model.__dict__.setdefault(_LOADED_DRAFTS_ATTRIBUTE, {})
    reference = model.get_input_embeddings().weight
    draft = loaded.get((source, revision))
    if draft is None:
        draft = LongSpecDraftModel.from_pretrained(source, revision=revision, dtype=reference.dtype).eval()
        loaded[(source, revision)] = draft
    if draft.norm.weight.device != reference.device:  # the target moved since the draft was loaded
        draft.to(reference.device)
    if not draft.is_bound or draft.target is not model:
        draft.bind(model)
    return draft
