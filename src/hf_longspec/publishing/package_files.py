"""Where the shipped templates live (package data `hf_longspec.model_cards`, or ./model_cards in a checkout)."""

from __future__ import annotations

from pathlib import Path


def model_cards_dir() -> Path:
    import hf_longspec.model_cards as cards  # served from ./model_cards by hf_longspec/__init__ in a checkout

    return Path(cards.__path__[0])


def card_template_path() -> Path:
    return model_cards_dir() / "template.md"


def custom_generate_template_dir() -> Path:
    """generate.py + requirements.txt, copied as-is into every custom_generate repo."""
    return model_cards_dir() / "custom_generate"
