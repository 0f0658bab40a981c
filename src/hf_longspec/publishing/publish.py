"""`hf-longspec publish DIR REPO_ID`: check a draft folder, then upload it as one Hub commit.

Order: local checks -> token check (whoami) -> create_repo -> upload_folder. Nothing is created
when the token or the network is missing; a repo this call created is deleted again if the
upload fails, so a failed publish leaves nothing half-done.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from ..errors import LongSpecError
from .checks import DraftFolderError, check_draft_folder

UPLOAD_IGNORE_PATTERNS = ["**/__pycache__/**", "*.pyc"]


class PublishError(LongSpecError):
    """The upload could not be done; the message names the cause and what to do."""


@dataclass(frozen=True)
class PublishResult:
    repo_id: str
    files: tuple[Path, ...]
    dry_run: bool
    url: str | None = None
    commit_url: str | None = None


def publish_draft(
    folder: str | Path,
    repo_id: str,
    *,
    token: str | None = None,
    private: bool = False,
    dry_run: bool = False,
    commit_message: str | None = None,
    api=None,
) -> PublishResult:
    """Check `folder` (see `check_draft_folder`) and upload it to the model repo `repo_id`.

    token: None uses the stored login / HF_TOKEN. dry_run: checks only, no network.
    api: an `huggingface_hub.HfApi` (tests pass a fake).
    """
    report = check_draft_folder(folder, repo_id=repo_id)
    if dry_run:
        return PublishResult(repo_id, report.files, dry_run=True)
    if api is None:
        from huggingface_hub import HfApi

        api = HfApi()
    user = _authenticate(api, token)
    _check_namespace(repo_id, user)
    existed = _repo_exists(api, repo_id, token)
    try:
        repo_url = api.create_repo(repo_id, token=token, private=private, exist_ok=True)
    except Exception as error:  # noqa: BLE001
        raise PublishError(f"could not create the model repo {repo_id}: {_describe(error)}") from error
    message = commit_message or f"Upload LongSpec draft for {report.card.data.base_model}"
    try:
        commit = api.upload_folder(
            repo_id=repo_id,
            folder_path=str(report.folder),
            commit_message=message,
            token=token,
            ignore_patterns=UPLOAD_IGNORE_PATTERNS,
        )
    except BaseException as error:
        cleanup = "the repo existed before and was left as it was (the upload is one commit)"
        if not existed:
            cleanup = _delete_created_repo(api, repo_id, token)
        if not isinstance(error, Exception):
            raise
        raise PublishError(f"upload to {repo_id} failed: {_describe(error)}; {cleanup}") from error
    return PublishResult(
        repo_id,
        report.files,
        dry_run=False,
        url=str(repo_url),
        commit_url=getattr(commit, "commit_url", None),
    )


def _authenticate(api, token: str | None) -> dict:
    """whoami() before anything is created; its failures become a message naming cause and fix."""
    from huggingface_hub.errors import HfHubHTTPError, LocalTokenNotFoundError, OfflineModeIsEnabled

    try:
        user = api.whoami(token=token)
    except LocalTokenNotFoundError as error:
        raise PublishError(
            "no Hugging Face token: pass --token hf_..., set HF_TOKEN, or run `hf auth login` (a write token)"
        ) from error
    except OfflineModeIsEnabled as error:
        raise PublishError(
            "HF_HUB_OFFLINE is set, so the Hub cannot be reached: unset it (and connect to the network) to publish"
        ) from error
    except HfHubHTTPError as error:
        status = getattr(getattr(error, "response", None), "status_code", None)
        if status == 401:
            raise PublishError("the Hub rejected the token (401): create a write token at "
                               "https://huggingface.co/settings/tokens and pass it with --token") from error
        raise PublishError(f"the Hub refused the token check: {_describe(error)}") from error
    except Exception as error:  # noqa: BLE001 - connection errors differ between huggingface_hub versions
        raise PublishError(
            f"cannot reach the Hugging Face Hub to check the token ({_describe(error)}): "
            "check the network connection (and HF_ENDPOINT / proxy settings), then retry"
        ) from error
    role = ((user.get("auth") or {}).get("accessToken") or {}).get("role")
    if role == "read":
        raise PublishError(
            "the token is read-only: publishing needs a write token (https://huggingface.co/settings/tokens)"
        )
    return user


def _check_namespace(repo_id: str, user: dict) -> None:
    if "/" not in repo_id:
        return
    owner = repo_id.split("/", 1)[0]
    allowed = {user.get("name")} | {org.get("name") for org in user.get("orgs") or [] if isinstance(org, dict)}
    if owner not in allowed:
        raise PublishError(
            f"the token belongs to {user.get('name')!r}, which cannot write to the namespace {owner!r} "
            f"(allowed: {', '.join(sorted(n for n in allowed if n))}); use one of those in REPO_ID"
        )


def _repo_exists(api, repo_id: str, token: str | None) -> bool:
    try:
        return bool(api.repo_exists(repo_id, token=token))
    except Exception as error:  # noqa: BLE001
        raise PublishError(f"could not check whether {repo_id} exists: {_describe(error)}") from error


def _delete_created_repo(api, repo_id: str, token: str | None) -> str:
    try:
        api.delete_repo(repo_id, token=token, missing_ok=True)
    except Exception as error:  # noqa: BLE001
        return f"the repo created by this call could NOT be deleted ({_describe(error)}): delete {repo_id} by hand"
    return "the repo created by this call was deleted again"


def _describe(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__


# ----------------------------------------------------------------------------- command line
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("folder", metavar="DIR", help="draft folder: config.json, model.safetensors, README.md")
    parser.add_argument("repo_id", metavar="REPO_ID", help="Hub model repo, e.g. your-name/longspec-smollm2")
    parser.add_argument("--token", default=None, help="Hub write token (default: HF_TOKEN or `hf auth login`)")
    parser.add_argument("--private", action="store_true", help="create the repo as private")
    parser.add_argument("--dry-run", action="store_true", help="run the checks and list the files; upload nothing")


def main(args: argparse.Namespace) -> int:
    try:
        result = publish_draft(args.folder, args.repo_id, token=args.token, private=args.private, dry_run=args.dry_run)
    except (DraftFolderError, PublishError) as error:
        print(f"hf-longspec publish: {error}", file=sys.stderr)
        return 1
    files = "\n".join(f"  {name}" for name in result.files)
    if result.dry_run:
        print(f"dry run: {args.folder} passes the checks; would upload to {result.repo_id}:\n{files}")
    else:
        print(f"uploaded to {result.url} in one commit ({result.commit_url}):\n{files}")
    return 0
