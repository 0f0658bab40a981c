"""Benchmark prompts cut from real local text (the corpus eval split; nothing is downloaded).

- code: repository-level code completion. The context is one installed package's source files
  (eval split) concatenated; the cut lands inside a file, so the model continues that file.
- prose: long-document continuation over package descriptions (dist-info METADATA) and
  license texts.
- any other corpus kind (docs, man, changelog, multilingual, licenses, pylib): long-document
  continuation over that source's eval split, so tau can be compared per kind.

A prompt of length L is the first L tokens of the same document stream at every length, so
the lengths of one prompt index differ only in how much context precedes the cut.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..corpus import KINDS, long_prompt_ids

# Large, commonly installed packages first; those with too little eval-split source are skipped.
CODE_PACKAGES = (
    "transformers", "torch", "numpy", "pandas", "scipy", "sympy", "networkx", "pip",
    "setuptools", "accelerate", "triton", "huggingface_hub", "datasets", "matplotlib",
)
WORKLOAD_KINDS = ("code", "prose")  # the default set; any corpus kind (corpus.KINDS) can be asked for


@dataclass(frozen=True)
class Workload:
    kind: str  # "code" | "prose"
    index: int  # prompt index within (kind, length)
    length: int  # prompt tokens
    source: str  # package name for code, "metadata+licenses" for prose
    input_ids: tuple[int, ...]

    @property
    def name(self) -> str:
        return f"{self.kind}-{self.index}:{self.source}"


def _code_prompt(tokenizer, length: int, index: int, seed: int) -> tuple[str, list[int]]:
    """The index-th package (in CODE_PACKAGES order) with at least `length` eval-split tokens."""
    found = -1
    for package in CODE_PACKAGES:
        try:
            ids = long_prompt_ids(tokenizer, length, kind="code", split="eval", seed=seed, packages=(package,))
        except (FileNotFoundError, ValueError):
            continue
        found += 1
        if found == index:
            return package, ids
    ids = long_prompt_ids(tokenizer, length, kind="code", split="eval", seed=seed + index)  # mixed packages
    return "mixed-packages", ids


def build_workloads(tokenizer, lengths, kinds=WORKLOAD_KINDS, prompts_per_length: int = 1,
                    seed: int = 0, first_index: int = 0) -> list[Workload]:
    """Prompts for every (length, kind, index), ordered by length; indices from `first_index` on, so that a
    later run can add prompts to an earlier one's."""
    workloads = []
    for length in sorted(lengths):
        for kind in kinds:
            for index in range(first_index, first_index + prompts_per_length):
                if kind == "code":
                    source, ids = _code_prompt(tokenizer, length, index, seed)
                elif kind in KINDS:  # prose = metadata + licenses; docs, man, changelog, multilingual, ...
                    source = "metadata+licenses" if kind == "prose" else kind
                    ids = long_prompt_ids(tokenizer, length, kind=kind, split="eval", seed=seed + index)
                else:
                    raise ValueError(f"unknown workload kind {kind!r}; choose from {KINDS}")
                workloads.append(Workload(kind, index, length, source, tuple(ids)))
    return workloads
