"""Publish a trained LongSpec draft: card from measured numbers -> custom_generate repo -> Hub.

    python examples/publish_draft.py --repo-id your-name/longspec-smollm2-135m-instruct \
        --bench-json bench-results/bench.json --training-command "hf-longspec train --output runs/smollm2 ..."
    # checks only by default; add --upload to push (needs a write token: --token, HF_TOKEN or `hf auth login`)

Defaults: the draft shipped with hf-longspec (model_cards/longspec-smollm2-135m-instruct) and its
target HuggingFaceTB/SmolLM2-135M-Instruct. Before uploading, the assembled repo is put into a
temporary Hugging Face cache and loaded by repo id with HF_HUB_OFFLINE=1, as a user's machine would.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from huggingface_hub import constants

from hf_longspec import LongSpecDraftModel
from hf_longspec.embedded import embedded_draft_dir
from hf_longspec.publishing import (
    DraftFolderError,
    PublishError,
    add_to_hub_cache,
    build_custom_generate_repo,
    publish_draft,
    write_card,
)

SMOLLM2 = "HuggingFaceTB/SmolLM2-135M-Instruct"


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo-id", required=True, help="Hub model repo to publish to")
    parser.add_argument("--draft-dir", type=Path, default=embedded_draft_dir(), help="saved draft folder")
    parser.add_argument("--base-model", default=SMOLLM2, help="the target's Hub id")
    parser.add_argument("--bench-json", type=Path, default=None,
                        help="bench.json of `hf-longspec bench` (else the card says: not measured)")
    parser.add_argument("--training-command", default=None, help="the command that trained the draft")
    parser.add_argument("--license", default=None, help="card license, e.g. apache-2.0")
    parser.add_argument("--out", type=Path, default=Path("build") / "longspec-repo", help="where to assemble the repo")
    parser.add_argument("--upload", action="store_true", help="upload (default: checks only)")
    parser.add_argument("--token", default=None)
    parser.add_argument("--private", action="store_true")
    return parser.parse_args(argv)


def check_loads_offline(repo_dir: Path, repo_id: str) -> None:
    """Load the repo by id from a fresh cache with the Hub switched off."""
    with tempfile.TemporaryDirectory() as cache:
        add_to_hub_cache(repo_dir, repo_id, cache_dir=cache)
        offline = constants.HF_HUB_OFFLINE
        constants.HF_HUB_OFFLINE = True
        try:
            draft = LongSpecDraftModel.from_pretrained(repo_id, cache_dir=cache)
        finally:
            constants.HF_HUB_OFFLINE = offline
    print(f"loads offline by repo id: {type(draft).__name__}, {draft.num_parameters():,} parameters")


def main(argv=None) -> int:
    args = parse_args(argv)
    if not (args.draft_dir / "config.json").is_file():
        print(f"no saved draft in {args.draft_dir}: train one with `hf-longspec train`, or pass --draft-dir",
              file=sys.stderr)
        return 1
    repo_dir = build_custom_generate_repo(args.draft_dir, args.out, overwrite=True)
    card = write_card(repo_dir, args.base_model, args.bench_json, args.training_command,
                      repo_id=args.repo_id, license=args.license)
    print(f"assembled {repo_dir} (card: {card})")
    check_loads_offline(repo_dir, args.repo_id)
    try:
        result = publish_draft(repo_dir, args.repo_id, token=args.token,
                               private=args.private, dry_run=not args.upload)
    except (DraftFolderError, PublishError) as error:
        print(error, file=sys.stderr)
        return 1
    files = ", ".join(path.as_posix() for path in result.files)
    if result.dry_run:
        print(f"checks passed; --upload would send to {args.repo_id}: {files}")
    else:
        print(f"published {result.url} ({result.commit_url}): {files}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
