"""Shared pytest setup: Triton on the CPU interpreter, a tiny random Llama, the embedded target."""

import importlib.util
import os
from pathlib import Path

import pytest
import torch

# Triton reads TRITON_INTERPRET when kernels are defined: without CUDA, run them on the CPU
# interpreter so kernel tests work in CI. Must happen before anything imports triton.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

# The embedded target is read from its GGUF in every test, as the reference: the converted folder a first
# load leaves under HF_HOME (hf_longspec/embedded.py) is tested on its own, against it, in test_embedded_cache.
os.environ.setdefault("HF_LONGSPEC_CACHE", "off")

# Under pytest-xdist (the README's test command runs two workers) the workers share the machine's
# cores: each gets its share of intra-op threads instead of every worker spinning on all of them.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))


def tiny_llama(
    vocab_size=96,
    hidden_size=64,
    heads=4,
    kv_heads=2,
    layers=2,
    max_positions=2048,
    initializer_range=0.02,
    seed=0,
):
    """A small random LlamaForCausalLM (eval mode): head_dim = hidden_size // heads."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=max_positions,
        initializer_range=initializer_range,
    )
    model = LlamaForCausalLM(config).eval()
    model.generation_config.eos_token_id = None  # random models would stop at random "eos" tokens
    model.generation_config.bos_token_id = None
    return model


class ByteTokenizer:
    """Bytes as tokens (vocab 257): lets a tiny random target train on real local text."""

    eos_token_id = 256

    def __call__(self, texts, add_special_tokens=False):
        return {"input_ids": [list(t.encode("utf-8")) for t in texts]}

    def encode(self, text, add_special_tokens=False):
        return list(text.encode("utf-8"))

    def __len__(self):
        return 257


def perturbed_pair(widths=(2, 3, 3), draft_class=None, **target_kwargs):
    """A tiny random target and a draft bound to it, the draft's weights perturbed off their init."""
    from hf_longspec import LongSpecDraftModel

    target = tiny_llama(initializer_range=0.3, **target_kwargs)
    draft = (draft_class or LongSpecDraftModel).from_target(target, sliding_window=16, tree_widths=list(widths))
    with torch.no_grad():
        for p in draft.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return target, draft


def random_prompt(length=40, vocab=96, seed=1):
    return torch.randint(0, vocab, (1, length), generator=torch.Generator().manual_seed(seed))


def left_padded_batch(lengths=(30, 22, 27), vocab=96, seed=5):
    """Random rows of these lengths, left-padded with 0 to the longest: (rows, ids, attention_mask)."""
    generator = torch.Generator().manual_seed(seed)
    rows = [torch.randint(1, vocab, (n,), generator=generator) for n in lengths]
    width = max(lengths)
    ids = torch.zeros(len(rows), width, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, row in enumerate(rows):
        ids[i, width - len(row):], mask[i, width - len(row):] = row, 1
    return rows, ids, mask


@pytest.fixture(scope="session")
def embedded():
    """(model, tokenizer) of the embedded SmolLM2 target on the CPU; skipped when not installed."""
    from hf_longspec.embedded import embedded_gguf_path, load_embedded_target

    try:
        embedded_gguf_path()
    except FileNotFoundError as error:
        pytest.skip(str(error))
    return load_embedded_target(device="cpu")


REPO = Path(__file__).resolve().parents[1]


def load_script(relative_path: str, name: str | None = None):
    """A repository script (benchmarks/x.py, examples/x.py) imported as a module, so that a test calls
    its main() and helpers the way its command line does."""
    path = REPO / relative_path
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

