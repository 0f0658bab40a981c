"""Test drafts that know the answer: see hf_longspec.testing (shared with benchmarks/gpu_round_check.py)."""

from hf_longspec.testing import SteeredDraft

__all__ = ["SteeredDraft"]
