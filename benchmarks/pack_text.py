"""Copy one split of this machine's /usr/share text sources into a folder another machine reads
with HF_LONGSPEC_USR_SHARE=FOLDER (hf_longspec.corpus).

    PYTHONPATH=src python benchmarks/pack_text.py --out .carry/usr_share_eval --sources multilingual
    # on the GPU machine: HF_LONGSPEC_USR_SHARE=$PWD/.carry/usr_share_eval python benchmarks/tau_curve.py \
    #     --kinds multilingual ...

Why: the GPU machine has ~1.4k tokens of non-English text, too little for a 2k prompt, so the
draft-quality issue's multilingual goal could be measured only on the CPU. The files keep their
paths relative to /usr/share, so their keys, and so their split, stay what they are here: an
eval-split copy holds no training file. Only files under /usr/share are copied (catalogs inside
site-packages have other keys); a manifest records what went in and from where.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
from pathlib import Path

import torch

from hf_longspec.bench.machine import machine_info
from hf_longspec.corpus import CorpusRoots, default_roots, documents


def pack(out: Path, sources, split: str, roots: CorpusRoots, max_bytes: int | None = None,
         shuffle_seed: int | None = None, each_max_bytes: int | None = None) -> dict:
    """Copy the `split` documents of `sources` that lie under roots.usr_share into `out`, same relative
    paths, in document order until `max_bytes`; returns the manifest (also written to out).
    shuffle_seed: a seeded random order instead, so that a byte cap samples every language rather
    than the first ones of the alphabet (catalogs are read folder by folder).
    each_max_bytes: a cap per source too, so that the first source cannot fill a small pack alone
    (3015 man pages take 23 MiB; a pack that travels beside the model has room for ~8 MiB gzipped)."""
    if roots.usr_share is None:
        raise FileNotFoundError("this machine has no /usr/share to pack")
    base = roots.usr_share.resolve()
    copied, total = {}, 0
    for source in sources:
        files = []
        candidates = list(documents(source, split, None, roots))
        if shuffle_seed is not None:
            random.Random(shuffle_seed).shuffle(candidates)
        mine = 0
        for document in candidates:
            path = document.path.resolve()
            if base not in path.parents or document.key != path.relative_to(base).as_posix():
                continue  # not a /usr/share file, or a key that is not its path there
            size = path.stat().st_size
            if max_bytes is not None and total + size > max_bytes:
                break
            if each_max_bytes is not None and mine + size > each_max_bytes:
                break
            target = out / document.key
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
            files.append(document.key)
            total += size
            mine += size
        copied[source] = files
    manifest = {"split": split, "sources": {s: len(f) for s, f in copied.items()}, "bytes": total,
                "files": copied}
    (out / "pack_manifest.json").write_text(json.dumps(manifest, indent=1))
    return manifest


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--sources", nargs="+", default=["multilingual"])
    parser.add_argument("--split", choices=["train", "eval"], default="eval")
    parser.add_argument("--max-mb", type=float, default=40.0, help="stop copying past this size")
    parser.add_argument("--max-mb-each", type=float, default=None, help="stop copying a source past this size")
    parser.add_argument("--shuffle-seed", type=int, default=None,
                        help="copy in a seeded random order (a sample of every language under --max-mb)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    each = None if args.max_mb_each is None else int(args.max_mb_each * 2**20)
    manifest = pack(out, args.sources, args.split, default_roots(), int(args.max_mb * 2**20),
                    args.shuffle_seed, each)
    manifest["machine"] = machine_info(torch.device("cpu"), ["benchmarks/pack_text.py", *(argv or sys.argv[1:])])
    (out / "pack_manifest.json").write_text(json.dumps(manifest, indent=1))
    print(f"packed {manifest['sources']} ({manifest['bytes'] / 2**20:.1f} MiB) into {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
