"""Put a local draft folder into the Hugging Face cache as if it had been downloaded.

Machines without Hub access (HF_HUB_OFFLINE=1) then load it by repo id:
`LongSpecDraftModel.from_pretrained("owner/name")`. The layout is huggingface_hub's own:
models--owner--name/{blobs/<sha256>, snapshots/<commit>/<files -> blobs>, refs/<revision>}.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from huggingface_hub import constants
from huggingface_hub.file_download import repo_folder_name
from huggingface_hub.utils import validate_repo_id

from .draft_files import folder_files


def add_to_hub_cache(
    folder: str | Path, repo_id: str, *, cache_dir: str | Path | None = None, revision: str = "main"
) -> Path:
    """Copy `folder` into the cache as `repo_id` at `revision`; returns the snapshot directory.

    The commit hash is derived from the files' contents, so the same folder gives the same snapshot.
    cache_dir defaults to huggingface_hub's current cache (HF_HUB_CACHE / HF_HOME).
    """
    validate_repo_id(repo_id)
    folder = Path(folder)
    names = folder_files(folder)
    if not names:
        raise FileNotFoundError(f"{folder} holds no files to cache")
    digests = {name: _sha256(folder / name) for name in names}
    commit = hashlib.sha1("".join(f"{name.as_posix()}\0{digests[name]}\n" for name in names).encode()).hexdigest()

    cache_dir = Path(cache_dir or constants.HF_HUB_CACHE)
    repo_dir = cache_dir / repo_folder_name(repo_id=repo_id, repo_type="model")
    snapshot = repo_dir / "snapshots" / commit
    for name, digest in digests.items():
        blob = repo_dir / "blobs" / digest
        if not blob.exists():
            blob.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(folder / name, blob)
        _link(blob, snapshot / name)
    refs = repo_dir / "refs" / revision
    refs.parent.mkdir(parents=True, exist_ok=True)
    refs.write_text(commit)
    return snapshot


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _link(blob: Path, pointer: Path) -> None:
    """A relative symlink as huggingface_hub makes; a copy where symlinks are not allowed."""
    pointer.parent.mkdir(parents=True, exist_ok=True)
    if pointer.is_symlink() or pointer.exists():
        pointer.unlink()
    try:
        os.symlink(os.path.relpath(blob, pointer.parent), pointer)
    except OSError:
        shutil.copyfile(blob, pointer)
