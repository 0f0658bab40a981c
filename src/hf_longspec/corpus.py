"""Real local text for prompts, training and benchmarks: nothing is downloaded.

Code = Python source of installed packages; prose = package descriptions (dist-info METADATA),
license texts. Files are split into train / eval by a hash of their path relative to
site-packages, so the same file lands in the same split on every machine.
"""

from __future__ import annotations

import hashlib
import random
import site
import sysconfig
from functools import lru_cache
from pathlib import Path

KINDS = ("code", "prose")
SPLITS = ("train", "eval", "all")
_COMMON_LICENSES = Path("/usr/share/common-licenses")
_MIN_FILE_CHARS = 400


@lru_cache(maxsize=None)
def site_packages_roots() -> tuple[Path, ...]:
    roots = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    try:
        roots += site.getsitepackages()
    except AttributeError:  # virtualenvs of old Pythons
        pass
    seen, unique = set(), []
    for root in map(Path, roots):
        if root.is_dir() and root.resolve() not in seen:
            seen.add(root.resolve())
            unique.append(root)
    return tuple(unique)


def split_of(relative_path: str) -> str:
    """'eval' for one file in ten (stable across machines), else 'train'."""
    return "eval" if hashlib.md5(relative_path.encode()).digest()[0] % 10 == 0 else "train"


def _candidates(kind: str, packages: tuple[str, ...] | None):
    for root in site_packages_roots():
        if kind == "code":
            dirs = [root / p for p in packages] if packages else [d for d in root.iterdir() if d.is_dir()]
            for package_dir in sorted(dirs):
                if not package_dir.is_dir() or package_dir.name.endswith((".dist-info", ".egg-info")):
                    continue
                for path in sorted(package_dir.rglob("*.py")):
                    yield root, path
        else:
            for info in sorted(root.glob("*.dist-info")):
                if packages and not any(info.name.lower().startswith(p.lower().replace("_", "-")) or
                                        info.name.lower().startswith(p.lower()) for p in packages):
                    continue
                for path in sorted(info.rglob("*")):
                    if path.is_file() and (path.name == "METADATA" or "LICEN" in path.name.upper()):
                        yield root, path
    if kind == "prose" and not packages and _COMMON_LICENSES.is_dir():
        for path in sorted(_COMMON_LICENSES.iterdir()):
            if path.is_file():
                yield _COMMON_LICENSES.parent, path


@lru_cache(maxsize=64)
def text_files(kind: str = "code", split: str = "all", packages: tuple[str, ...] | None = None) -> tuple[Path, ...]:
    """Sorted local files of one kind and split (packages: restrict to these top-level names)."""
    if kind not in KINDS or split not in SPLITS:
        raise ValueError(f"kind must be one of {KINDS} and split one of {SPLITS}; got {kind!r}, {split!r}")
    chosen = []
    for root, path in _candidates(kind, packages):
        relative = path.relative_to(root).as_posix()
        if split != "all" and split_of(relative) != split:
            continue
        try:
            if path.stat().st_size >= _MIN_FILE_CHARS:
                chosen.append(path)
        except OSError:
            continue
    return tuple(chosen)


def read_text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def long_prompt_ids(tokenizer, num_tokens: int, kind: str = "code", split: str = "eval", seed: int = 0,
                    packages: tuple[str, ...] | None = None) -> list[int]:
    """Token ids of `num_tokens` tokens of real text: whole files concatenated, then cut."""
    files = list(text_files(kind, split, packages))
    if not files:
        raise FileNotFoundError(f"No local {kind} files found for split={split!r}, packages={packages}")
    random.Random(seed).shuffle(files)
    ids: list[int] = []
    for path in files:
        header = f"# file: {path.name}\n" if kind == "code" else "\n\n"
        ids += tokenizer.encode(header + read_text(path), add_special_tokens=False)
        if len(ids) >= num_tokens:
            return ids[:num_tokens]
    raise ValueError(f"Only {len(ids)} tokens of local {kind} text found; asked for {num_tokens}")
