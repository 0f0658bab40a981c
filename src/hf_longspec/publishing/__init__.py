"""Publishing LongSpec drafts: model cards from measured facts, folder checks, Hub upload,
Hub drafts in the offline cache, and custom_generate repositories for plain transformers."""

from .card import render_card, write_card
from .checks import DraftFolderError, DraftFolderReport, check_draft_folder
from .custom_generate_repo import build_custom_generate_repo
from .hub_cache import add_to_hub_cache
from .measurements import BenchmarkResults, load_benchmark
from .publish import PublishError, PublishResult, publish_draft

__all__ = [
    "render_card",
    "write_card",
    "check_draft_folder",
    "DraftFolderError",
    "DraftFolderReport",
    "build_custom_generate_repo",
    "add_to_hub_cache",
    "load_benchmark",
    "BenchmarkResults",
    "publish_draft",
    "PublishError",
    "PublishResult",
]
