"""Benchmarks: `hf-longspec bench` (LongSpec against vanilla generate and prompt lookup on long real
prompts, one process, one run) and the pieces it is built from.

- workloads: prompts from local code and prose (corpus eval split)
- methods:   the compared generate() calls
- runner:    warm-up, timing, forward counting, memory
- summary:   per-length rows, exactness via the local evaluate metric, the markdown table
- plotting:  speedup vs prompt length
- harness:   the CLI
"""
