"""Publishing drafts: cards from measured facts, folder checks, Hub upload (a fake HfApi, no network),
Hub drafts loaded offline from the cache, and custom_generate repos for plain transformers."""

import functools
import gc
import json
import os
import re
import sys
import weakref
from dataclasses import asdict
from types import SimpleNamespace

import huggingface_hub
import pytest
import torch
from huggingface_hub import ModelCard, constants, scan_cache_dir
from safetensors.torch import save_file
from transformers import AutoModel

from conftest import REPO, load_script, tiny_llama
from hf_longspec import LongSpecDraftModel
from hf_longspec.publishing import (
    DraftFolderError,
    PublishError,
    add_to_hub_cache,
    build_custom_generate_repo,
    check_draft_folder,
    publish_draft,
    render_card,
    write_card,
)

TARGET_REPO = "test-org/tiny-target"
DRAFT_REPO = "test-org/tiny-longspec"
MASKED = {"longspec_verify_attention": "masked"}  # plain SDPA verification: fast on the CPU
NEW_TOKENS = 8


# ----------------------------------------------------------------------------- fixtures
def _tiny_tokenizer():
    """A word-level tokenizer that covers the card's example prompt (ids < the tiny vocab)."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["[UNK]", "[EOS]", *"summarize this report revenue grew in every region quarter .".split()]
    backend = Tokenizer(models.WordLevel({word: i for i, word in enumerate(words)}, unk_token="[UNK]"))
    backend.normalizer = normalizers.Lowercase()
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]", eos_token="[EOS]")


@pytest.fixture
def draft_dir(tmp_path):
    """A saved random draft for tiny_llama() (small tree: fast on the CPU)."""
    folder = tmp_path / "draft"
    LongSpecDraftModel.from_target(tiny_llama(), tree_widths=[2, 2]).save_pretrained(folder)
    return folder


@pytest.fixture
def offline_hub(tmp_path, monkeypatch):
    """An empty Hugging Face cache in tmp_path, offline mode, transformers' code cache in tmp_path.

    huggingface_hub and transformers read `constants.HF_HUB_CACHE` / `HF_HUB_OFFLINE` at call time;
    the environment variables are set too, for anything that reads them afresh.
    """
    import transformers.dynamic_module_utils as dynamic_modules

    cache = tmp_path / "hub"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(dynamic_modules, "HF_MODULES_CACHE", str(tmp_path / "modules"))
    monkeypatch.setattr(sys, "path", list(sys.path))  # transformers appends its modules cache to sys.path
    return cache


def _greedy(target, ids_or_inputs, **kwargs):
    """Vanilla greedy decoding, past any instance-level generate that binding installed."""
    inputs = ids_or_inputs if isinstance(ids_or_inputs, dict) else {"input_ids": ids_or_inputs}
    return type(target).generate(target, **inputs, max_new_tokens=NEW_TOKENS, do_sample=False, **kwargs)


def _prompt_ids(length=40, seed=1):
    return torch.randint(0, 96, (1, length), generator=torch.Generator().manual_seed(seed))


def _python_blocks(card_text):
    return re.findall(r"```python\n(.*?)```", card_text, flags=re.S)


# ----------------------------------------------------------------------------- model card
def test_card_metadata_and_not_measured_without_benchmark(draft_dir):
    card = render_card(draft_dir, base_model=TARGET_REPO, repo_id=DRAFT_REPO)

    assert isinstance(card, ModelCard)
    assert card.data.base_model == TARGET_REPO
    assert card.data.library_name == "transformers"
    assert card.data.pipeline_tag == "text-generation"
    assert {"longspec", "speculative-decoding", "draft-model"} <= set(card.data.tags)
    assert ("- LongSpec: τ (mean tokens per target forward) not measured; "
            "speedup over vanilla `generate()` not measured.") in card.text
    assert "Training data: not recorded" in card.text
    assert "Recipe: not recorded" in card.text
    assert "Training command: not recorded" in card.text
    assert "custom_generate" not in card.content  # only a folder that has custom_generate/ advertises it
    assert "45.3K parameters, F32" in card.text  # counted from the safetensors header
    assert f'LongSpecDraftModel.from_pretrained("{DRAFT_REPO}"' in card.text


def test_card_reports_only_measured_numbers_and_the_recipe(draft_dir, tmp_path):
    from hf_longspec.training.run import TrainRecipe

    recipe = TrainRecipe(output_dir="runs/smollm2", max_steps=300, seq_len=1024, max_tokens=2_000_000)
    (draft_dir / "training_recipe.json").write_text(json.dumps(asdict(recipe)))
    (draft_dir / "training_log.json").write_text(json.dumps([{"loss": 3.5, "step": 10}, {"loss": 2.25, "step": 300}]))
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps({
        "environment": {"device": "NVIDIA H200", "dtype": "bfloat16"},
        "runs": [
            {"task": "code", "prompt_tokens": 4096, "new_tokens": 128, "method": "vanilla", "tokens_per_second": 40.0},
            {"task": "code", "prompt_tokens": 4096, "new_tokens": 128, "method": "longspec",
             "tokens_per_second": 96.0, "tau": 3.4, "speedup": 2.4, "exact_match": 1.0},
            {"task": "prose", "prompt_tokens": 8192, "new_tokens": 128, "method": "vanilla", "tokens_per_second": 30.0},
            {"task": "prose", "prompt_tokens": 8192, "new_tokens": 128, "method": "longspec",
             "tokens_per_second": 60.0},
        ],
    }))
    command = "hf-longspec train --output runs/smollm2 --max-steps 300 --seq-len 1024"

    path = write_card(draft_dir, TARGET_REPO, bench, command, repo_id=DRAFT_REPO, license="apache-2.0")
    card = ModelCard.load(path)

    assert path == draft_dir / "README.md"
    assert card.data.license == "apache-2.0"
    text = card.text
    # 3.40: the only measured tau; 2.00 = 60 / 30 tokens/s, both measured
    assert "- longspec: τ (mean tokens per target forward) 3.40; speedup over vanilla `generate()` 2.00-2.40x." in text
    assert "| code | 4096 | 128 | longspec | 3.40 | 96.0 | 2.40x | yes |" in text
    assert "| prose | 8192 | 128 | longspec | not measured | 60.0 | 2.00x | not measured |" in text
    assert "| code | 4096 | 128 | vanilla | not measured | 40.0 | 1.00x | not measured |" in text
    assert "Measured on: device NVIDIA H200, dtype bfloat16." in text
    assert f"```bash\n{command}\n```" in text
    assert "| seq_len | 1024 |" in text and "| anchor_offset | true |" in text
    assert "in 1024-token chunks, at most 2,000,000 tokens" in text
    assert "Last logged training loss: 2.2500 at step 300." in text


def test_card_states_the_text_training_actually_read_and_where_it_started(draft_dir):
    """A mix asks for shares; a machine without some source gives others (the chat-tuned draft asked
    for 25% chat and 11% man pages and read 2.5% and none). The card states what training read,
    from training_data.json, and that the draft continued from trained weights, not the asked mix."""
    from hf_longspec.training.run import TrainRecipe

    recipe = TrainRecipe(output_dir="runs/chat", max_steps=20, seq_len=512, max_tokens=1_000_000,
                         corpus_mix="chat", init_draft="embedded")
    (draft_dir / "training_recipe.json").write_text(json.dumps(asdict(recipe)))
    (draft_dir / "training_data.json").write_text(json.dumps({
        "code": {"weight": 0.225, "tokens": 860_000, "documents": 40, "share": 0.86},
        "man": {"weight": 0.1125, "tokens": 0, "documents": 0, "share": 0.0},
        "chat": {"weight": 0.25, "tokens": 140_000, "documents": 64, "share": 0.14},
    }))

    text = render_card(draft_dir, TARGET_REPO, repo_id=DRAFT_REPO).text

    assert ("Training data: local text only, nothing downloaded, 1,000,000 tokens read in 512-token chunks: "
            "code 86.0% (860,000 tokens from 40 documents; asked 22.5%)") in text
    assert "chat 14.0% (140,000 tokens from 64 documents; asked 25.0%)" in text
    assert "man: asked 11.2%, none on the training machine" in text
    assert "Training started from the trained draft `embedded`" in text


def test_card_states_the_training_cost_the_run_recorded(draft_dir):
    """training_speed.json (written by every run) gives the card its cost: steps, seconds, tokens/s,
    GPUs and peak memory; without the file the card says nothing of it."""
    assert "Training time" not in render_card(draft_dir, TARGET_REPO).text
    (draft_dir / "training_speed.json").write_text(json.dumps({
        "steps": 2200, "tokens_per_step": 32768, "tokens_per_second": 285821.3, "all_steps_seconds": 255.36,
        "peak_gpu_memory_gib_per_rank": [19.9], "global_step": 2200, "world_size": 1, "fsdp": False}))

    text = render_card(draft_dir, TARGET_REPO).text

    assert ("Training time: 2200 steps in 255 s on 1 process (0.07 device-hours), 72,089,600 tokens, "
            "285,821 tokens/s after warm-up, peak GPU memory 19.9 GiB per rank.") in text


def test_card_reads_the_bench_json_of_hf_longspec_bench(draft_dir, tmp_path):
    """The keys `hf-longspec bench` writes (schema hf-longspec-bench/1), one row per method and length."""
    def row(method, label, length, decode_rate, vs_eager, vs_sdpa, tau=None, exact=None, per_forward=1.0):
        return {"method": method, "label": label, "length": length, "tokens_per_s": decode_rate / 2,
                "decode_tokens_per_s": decode_rate, "speedup_vs_eager": vs_eager, "speedup_vs_sdpa": vs_sdpa,
                "tokens_per_target_forward": per_forward, "longspec_tau": tau,
                **({"exactness_vs_sdpa": {"exact_match": exact}} if exact is not None else {})}

    TREE = "LongSpec tree 4-16 (hybrid)"
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps({
        "schema": "hf-longspec-bench/1",
        "machine": {"device_name": "NVIDIA H200", "torch": "2.11.0", "transformers": "5.17.0",
                    "hf_longspec": "0.1.0", "date_utc": "2026-11-29T10:00:00+00:00"},
        "settings": {"kinds": ["code", "prose"], "max_new_tokens": 128},
        "model": {"dtype": "torch.bfloat16"},
        "draft": {"source": "embedded trained draft", "trained": True},
        "rows": [
            row("vanilla_eager", "vanilla (eager)", 4096, 40.0, 1.0, 2.5, exact=1.0),
            row("vanilla_sdpa", "vanilla (sdpa)", 4096, 16.0, 0.4, 1.0),
            row("longspec_tree", TREE, 4096, 80.0, 2.0, 5.0, tau=3.2, exact=1.0, per_forward=3.1),
            row("longspec_tree", TREE, 8000, 60.0, 1.5, 4.0, tau=2.9, exact=0.5, per_forward=2.8),
        ],
        "runs": [{"method": "longspec_tree", "kind": "code", "length": 4096, "new_tokens": 128}],
        "notes": ["prompt lengths above 8064 were cut to 8064"],
    }))

    text = render_card(draft_dir, TARGET_REPO, bench, repo_id=DRAFT_REPO).text
    assert ("- LongSpec tree 4-16 (hybrid): τ (mean tokens per target forward) 2.90-3.20; "
            "speedup over vanilla `generate()` 1.50-2.00x.") in text  # against the faster vanilla (eager here)
    assert "| code+prose | 4096 | 128 | LongSpec tree 4-16 (hybrid) | 3.20 | 80.0 | 2.00x | yes |" in text
    assert "| code+prose | 8000 | 128 | LongSpec tree 4-16 (hybrid) | 2.90 | 60.0 | 1.50x | 50% of prompts |" in text
    assert "| code+prose | 4096 | 128 | vanilla (sdpa) | 1.00 | 16.0 | 0.40x | not measured |" in text
    assert ("Measured on: device NVIDIA H200, dtype bfloat16, torch 2.11.0, transformers 5.17.0, "
            "hf-longspec 0.1.0, date 2026-11-29, draft embedded trained draft.") in text
    assert "faster of vanilla eager and vanilla sdpa" in text and "were cut to 8064" in text
    assert "UNTRAINED" not in text


def test_card_usage_code_runs_as_written_offline(draft_dir, tmp_path, offline_hub, monkeypatch):
    """Both python blocks of the card, executed against a tiny target and draft in the Hub cache."""
    monkeypatch.setenv("TRITON_INTERPRET", "0")  # verification attention in PyTorch: kernels are tested elsewhere
    target_dir = tmp_path / "target"
    tiny_llama().save_pretrained(target_dir)
    _tiny_tokenizer().save_pretrained(target_dir)
    add_to_hub_cache(target_dir, TARGET_REPO)
    repo = build_custom_generate_repo(draft_dir, tmp_path / "repo")
    card_path = write_card(repo, TARGET_REPO, repo_id=DRAFT_REPO)
    add_to_hub_cache(repo, DRAFT_REPO)

    assert "custom_generate" in ModelCard.load(card_path).data.tags
    blocks = _python_blocks(card_path.read_text())
    assert len(blocks) == 2  # bound draft, then plain transformers with custom_generate
    for block in blocks:
        assert "max_new_tokens=128" in block
        namespace = {}
        exec(block.replace("max_new_tokens=128", f"max_new_tokens={NEW_TOKENS}"), namespace)  # noqa: S102
        model = namespace.get("target") or namespace["model"]
        assert torch.equal(namespace["output"], _greedy(model, dict(namespace["inputs"])))
        assert namespace["output"].shape[1] == namespace["inputs"]["input_ids"].shape[1] + NEW_TOKENS


# ----------------------------------------------------------------------------- Hub drafts offline
def test_hub_draft_loads_offline_from_the_cache(draft_dir, offline_hub):
    snapshot = add_to_hub_cache(draft_dir, DRAFT_REPO)

    cached = {repo.repo_id: repo for repo in scan_cache_dir(offline_hub).repos}  # huggingface_hub reads the layout
    assert cached[DRAFT_REPO].refs["main"].commit_hash == snapshot.name
    assert {f.file_name for f in cached[DRAFT_REPO].refs["main"].files} == {"config.json", "model.safetensors"}

    draft = LongSpecDraftModel.from_pretrained(DRAFT_REPO)
    auto = AutoModel.from_pretrained(DRAFT_REPO)  # no trust_remote_code: `import hf_longspec` registered it
    assert type(auto) is LongSpecDraftModel
    saved = LongSpecDraftModel.from_pretrained(draft_dir)
    for name, tensor in saved.state_dict().items():
        assert torch.equal(draft.state_dict()[name], tensor) and torch.equal(auto.state_dict()[name], tensor)

    target, ids = tiny_llama(), _prompt_ids()
    reference = _greedy(target, ids)
    auto.bind(target)
    assert torch.equal(target.generate(ids, assistant_model=auto, max_new_tokens=NEW_TOKENS, do_sample=False, **MASKED),
                       reference)
    assert auto.last_stats.rounds > 0


# ----------------------------------------------------------------------------- custom_generate repo
def test_custom_generate_repo_from_a_local_folder_equals_vanilla(draft_dir, tmp_path, offline_hub, monkeypatch):
    import hf_longspec.generation as generation

    repo = build_custom_generate_repo(draft_dir, tmp_path / "repo")
    assert sorted(p.relative_to(repo).as_posix() for p in repo.rglob("*") if p.is_file()) == [
        "config.json", "custom_generate/generate.py", "custom_generate/requirements.txt", "model.safetensors"
    ]
    assert "hf-longspec" in (repo / "custom_generate" / "requirements.txt").read_text()
    used_drafts = []
    original = generation.longspec_generate

    @functools.wraps(original)  # generate() passes a custom_generate only the options its signature declares
    def recording_longspec_generate(model, *args, longspec_draft=None, **kwargs):
        used_drafts.append(longspec_draft)
        return original(model, *args, longspec_draft=longspec_draft, **kwargs)

    monkeypatch.setattr(generation, "longspec_generate", recording_longspec_generate)
    target, ids = tiny_llama(), _prompt_ids()
    reference = _greedy(target, ids)

    with pytest.raises(ValueError, match="trust_remote_code"):
        target.generate(ids, custom_generate=str(repo), max_new_tokens=NEW_TOKENS)
    for _ in range(2):  # the second call reuses the loaded draft
        out = target.generate(ids, custom_generate=str(repo), trust_remote_code=True, max_new_tokens=NEW_TOKENS,
                              do_sample=False, **MASKED)
        assert torch.equal(out, reference)
    assert len(used_drafts) == 2 and used_drafts[0] is used_drafts[1]
    assert used_drafts[0].target is target and used_drafts[0].last_stats.rounds > 0
    for name, tensor in LongSpecDraftModel.from_pretrained(draft_dir).state_dict().items():
        assert torch.equal(used_drafts[0].state_dict()[name], tensor)
    assert not any("longspec" in name or "draft" in name for name in target.state_dict())

    other_dir = tmp_path / "other-draft"
    LongSpecDraftModel.from_target(tiny_llama(), tree_widths=[3]).save_pretrained(other_dir)
    out = target.generate(ids, custom_generate=str(repo), trust_remote_code=True, draft_path=str(other_dir),
                          max_new_tokens=NEW_TOKENS, do_sample=False, **MASKED)
    assert torch.equal(out, reference) and used_drafts[-1].config.tree_widths == [3]

    collected = weakref.ref(target)
    del target, used_drafts[:]
    gc.collect()
    assert collected() is None  # the loaded drafts do not keep the model alive


def test_repo_generate_outside_generate_asks_for_a_draft_path():
    from hf_longspec.errors import UnsupportedGenerationError
    from hf_longspec.publishing.custom_generate_runtime import generate_with_repo_draft

    with pytest.raises(UnsupportedGenerationError, match="draft_path="):
        generate_with_repo_draft(tiny_llama(), _prompt_ids(), max_new_tokens=2)


def test_build_repo_leaves_out_subfolders_and_keeps_existing_output(draft_dir, tmp_path):
    (draft_dir / "checkpoint-10").mkdir()
    (draft_dir / "checkpoint-10" / "optimizer.pt").write_bytes(b"pickle")
    repo = build_custom_generate_repo(draft_dir, tmp_path / "repo")
    assert not (repo / "checkpoint-10").exists()
    with pytest.raises(FileExistsError):
        build_custom_generate_repo(draft_dir, repo)
    assert build_custom_generate_repo(draft_dir, repo, overwrite=True) == repo


# ----------------------------------------------------------------------------- folder checks
def test_check_accepts_a_complete_folder(draft_dir):
    write_card(draft_dir, TARGET_REPO, repo_id=DRAFT_REPO)
    report = check_draft_folder(draft_dir, repo_id=DRAFT_REPO)
    assert [p.as_posix() for p in report.files] == ["README.md", "config.json", "model.safetensors"]
    assert report.card.data.base_model == TARGET_REPO


def test_check_lists_every_problem(draft_dir):
    (draft_dir / "pytorch_model.bin").write_bytes(b"pickle")
    (draft_dir / "checkpoint-5").mkdir()
    (draft_dir / "checkpoint-5" / "optimizer.pt").write_bytes(b"pickle")
    save_file({"model.embed_tokens.weight": torch.zeros(96, 64), "lm_head.weight": torch.zeros(96, 64)},
              str(draft_dir / "target.safetensors"))
    (draft_dir / "README.md").write_text("---\nlibrary_name: transformers\n---\n# a draft\n")

    with pytest.raises(DraftFolderError) as caught:
        check_draft_folder(draft_dir, repo_id=DRAFT_REPO)
    problems = "\n".join(caught.value.problems)
    assert "pytorch_model.bin" in problems and "checkpoint-5/optimizer.pt" in problems
    assert "target weights inside: lm_head.weight, model.embed_tokens.weight" in problems
    assert "weights the draft does not have" in problems
    assert "metadata lacks base_model, tags" in problems
    assert f"does not load '{DRAFT_REPO}'" in problems


def test_check_rejects_a_config_that_is_not_a_draft_and_mismatched_weights(draft_dir, tmp_path):
    target_dir = tmp_path / "target"
    tiny_llama().save_pretrained(target_dir)
    with pytest.raises(DraftFolderError, match="LlamaConfig .* not a LongSpecDraftConfig"):
        check_draft_folder(target_dir)

    config = json.loads((draft_dir / "config.json").read_text())
    config["intermediate_size"] = 256
    (draft_dir / "config.json").write_text(json.dumps(config))
    with pytest.raises(DraftFolderError, match=r"mlp.down_proj.weight \(64, 128\) != \(64, 256\)"):
        check_draft_folder(draft_dir)


# ----------------------------------------------------------------------------- publish (no network)
class FakeHfApi:
    """Records calls; `failures` maps a method name to the exception it raises."""

    def __init__(self, user=None, existing=(), failures=None):
        self.user = user or {"name": "test-org", "orgs": [], "auth": {"accessToken": {"role": "write"}}}
        self.existing = set(existing)
        self.failures = failures or {}
        self.calls = []

    def _call(self, name, *args, **kwargs):
        self.calls.append((name, args, kwargs))
        if name in self.failures:
            raise self.failures[name]

    def whoami(self, token=None):
        self._call("whoami", token=token)
        return self.user

    def repo_exists(self, repo_id, token=None):
        self._call("repo_exists", repo_id, token=token)
        return repo_id in self.existing

    def create_repo(self, repo_id, token=None, private=None, exist_ok=False):
        self._call("create_repo", repo_id, token=token, private=private, exist_ok=exist_ok)
        self.existing.add(repo_id)
        return f"https://huggingface.co/{repo_id}"

    def upload_folder(self, **kwargs):
        self._call("upload_folder", **kwargs)
        return SimpleNamespace(commit_url=f"https://huggingface.co/{kwargs['repo_id']}/commit/abc")

    def delete_repo(self, repo_id, token=None, missing_ok=False):
        self._call("delete_repo", repo_id, token=token, missing_ok=missing_ok)
        self.existing.discard(repo_id)

    @property
    def names(self):
        return [name for name, _, _ in self.calls]


@pytest.fixture
def ready_dir(draft_dir):
    write_card(draft_dir, TARGET_REPO, repo_id=DRAFT_REPO)
    return draft_dir


def test_publish_creates_the_repo_and_uploads_one_commit(ready_dir):
    api = FakeHfApi()
    result = publish_draft(ready_dir, DRAFT_REPO, token="hf_test", private=True, api=api)

    assert api.names == ["whoami", "repo_exists", "create_repo", "upload_folder"]
    _, args, create = api.calls[2]
    assert args == (DRAFT_REPO,) and create == {"token": "hf_test", "private": True, "exist_ok": True}
    upload = api.calls[3][2]
    assert upload["repo_id"] == DRAFT_REPO and upload["folder_path"] == str(ready_dir)
    assert upload["commit_message"] == f"Upload LongSpec draft for {TARGET_REPO}"
    assert result.url == f"https://huggingface.co/{DRAFT_REPO}" and not result.dry_run


@pytest.mark.parametrize(
    "failure, message",
    [
        (huggingface_hub.errors.LocalTokenNotFoundError("no token"), "no Hugging Face token: pass --token"),
        (huggingface_hub.errors.OfflineModeIsEnabled("offline"), "HF_HUB_OFFLINE is set"),
        (ConnectionError("Name or service not known"), "cannot reach the Hugging Face Hub .*Name or service not known"),
        (
            huggingface_hub.errors.HfHubHTTPError(
                "401 Unauthorized", response=SimpleNamespace(status_code=401, headers={}, request=None)
            ),
            "rejected the token",
        ),
    ],
)
def test_publish_without_token_or_network_creates_nothing(ready_dir, failure, message):
    api = FakeHfApi(failures={"whoami": failure})
    with pytest.raises(PublishError, match=message):
        publish_draft(ready_dir, DRAFT_REPO, api=api)
    assert api.names == ["whoami"]


@pytest.mark.parametrize(
    "user, message",
    [
        ({"name": "test-org", "auth": {"accessToken": {"role": "read"}}}, "read-only"),
        ({"name": "someone", "orgs": [{"name": "their-org"}]}, "cannot write to the namespace 'test-org'"),
    ],
)
def test_publish_refuses_tokens_that_cannot_write_there(ready_dir, user, message):
    api = FakeHfApi(user=user)
    with pytest.raises(PublishError, match=message):
        publish_draft(ready_dir, DRAFT_REPO, api=api)
    assert "create_repo" not in api.names


def test_failed_upload_deletes_the_repo_it_created(ready_dir):
    api = FakeHfApi(failures={"upload_folder": OSError("connection reset")})
    with pytest.raises(PublishError, match="connection reset.*created by this call was deleted again"):
        publish_draft(ready_dir, DRAFT_REPO, api=api)
    assert api.names == ["whoami", "repo_exists", "create_repo", "upload_folder", "delete_repo"]
    assert DRAFT_REPO not in api.existing


def test_failed_upload_leaves_an_existing_repo_alone(ready_dir):
    api = FakeHfApi(existing={DRAFT_REPO}, failures={"upload_folder": OSError("connection reset")})
    with pytest.raises(PublishError, match="existed before and was left as it was"):
        publish_draft(ready_dir, DRAFT_REPO, api=api)
    assert "delete_repo" not in api.names and DRAFT_REPO in api.existing


def test_dry_run_and_failed_checks_touch_no_hub(ready_dir, draft_dir):
    api = FakeHfApi()
    result = publish_draft(ready_dir, DRAFT_REPO, dry_run=True, api=api)
    assert result.dry_run and [p.as_posix() for p in result.files] == ["README.md", "config.json", "model.safetensors"]
    (draft_dir / "README.md").unlink()
    with pytest.raises(DraftFolderError, match="README.md"):
        publish_draft(draft_dir, DRAFT_REPO, api=api)
    assert api.calls == []


def test_cli_publish_with_the_real_client_offline(ready_dir, tmp_path, monkeypatch, capsys):
    """The real HfApi, no stored token, offline: clear messages, exit code 1, no request sent."""
    from hf_longspec.cli import main

    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))
    monkeypatch.setattr(constants, "HF_STORED_TOKENS_PATH", str(tmp_path / "no-stored-tokens"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)

    assert main(["publish", str(ready_dir), DRAFT_REPO, "--dry-run"]) == 0
    assert "passes the checks" in capsys.readouterr().out
    assert main(["publish", str(ready_dir), DRAFT_REPO]) == 1
    assert "no Hugging Face token" in capsys.readouterr().err
    assert main(["publish", str(ready_dir), DRAFT_REPO, "--token", "hf_test"]) == 1
    assert "HF_HUB_OFFLINE is set" in capsys.readouterr().err


def test_example_script_assembles_checks_and_dry_runs(draft_dir, tmp_path, capsys):
    example = load_script("examples/publish_draft.py", "publish_draft_example")

    out = tmp_path / "repo"
    assert example.main(["--repo-id", DRAFT_REPO, "--draft-dir", str(draft_dir), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "loads offline by repo id: LongSpecDraftModel" in printed and "checks passed" in printed
    assert (out / "custom_generate" / "generate.py").is_file()
    assert ModelCard.load(out / "README.md").data.base_model == "HuggingFaceTB/SmolLM2-135M-Instruct"


def test_card_measurements_are_built_from_the_benchmark_jsons(draft_dir, tmp_path):
    """benchmarks/card_measurements.py copies measured rows (the committed H200 decode_bench and tau_curve
    JSONs of 2026-12-01) into a card's measurements.json: every number on the card traces to a row."""
    repo = REPO
    builder = load_script("benchmarks/card_measurements.py")
    decode_json = repo / "docs" / "results" / "decode_bench_h200_2026-12-01.json"
    tau_json = repo / "docs" / "results" / "candidate_gpu_eval_embedded_2026-12-01.json"
    out = tmp_path / "measurements.json"
    assert builder.main(["--tau", str(tau_json), "--decode", str(decode_json), "--out", str(out),
                         "--note", "a note"]) == 0
    built = json.loads(out.read_text())
    decode, tau = json.loads(decode_json.read_text()), json.loads(tau_json.read_text())
    end_to_end = {(r["task"], r["prompt_tokens"]): r for r in built["runs"] if r.get("speedup")}
    for row in decode["rows"]:
        run = end_to_end[(row["kind"], row["length"])]
        assert run["speedup"] == round(row["longspec"]["speedup_vs_static_median"], 2)
        assert run["tokens_per_second"] == round(row["longspec"]["median"], 1)
    held_out = [r for r in built["runs"] if r["new_tokens"] == tau["settings"]["new_tokens"] and "speedup" not in r
                and r["method"].startswith("LongSpec")]
    assert len(held_out) == len(tau["rows"]) and built["notes"][-1] == "a note"
    first_depth = sum(row["depth"]["reach"][0] for row in tau["rows"]) / len(tau["rows"])
    assert f"mean over the {len(tau['rows'])} held-out tau rows): depth 1 {first_depth:.0%}, depth 2" in " ".join(
        built["notes"])
    assert built["environment"]["device"] == "NVIDIA H200" and built["environment"]["dtype"] == "bfloat16"
    text = render_card(draft_dir, TARGET_REPO, out, repo_id=DRAFT_REPO).text
    assert "| code | 4096 | 128 | LongSpec (greedy), end to end | 3.85 | 1179.4 | 3.54x |" in text
    assert ("- LongSpec (greedy), end to end: τ (mean tokens per target forward) 2.08-3.85; "
            "speedup over vanilla static (compiled) 1.81-3.54x.") in text  # the baseline its rows name
    with pytest.raises(ValueError, match="give --tau, --decode or both"):
        builder.build(None, None, [])
    # a source joined from two runs (tau_curve.py --join) names both commands and both dates
    first, second = dict(tau["machine"]), {**tau["machine"], "command_line": "tau_curve.py --lengths 1024 8000",
                                           "git_commit": "abcdef0123", "date_utc": "2026-12-04T10:00:00"}
    joined = builder.build({**tau, "machine": [first, second]}, None, [])
    assert f"`{first['command_line']}` (hf-longspec commit {first['git_commit'][:7]}); " \
           "`tau_curve.py --lengths 1024 8000` (hf-longspec commit abcdef0)" in joined["notes"][0]
    assert joined["environment"]["date"] == f"{first['date_utc'][:10]}, 2026-12-04"
    # a run whose calls re-ranked the tree's leaves says so in its rows' method (forty-fourth session)
    reranked = builder.build({**tau, "settings": {**tau["settings"], "rerank_leaves": True}}, None, [])
    assert all(", leaves re-ranked" in run["method"] for run in reranked["runs"])
    assert not any("re-ranked" in run["method"] for run in built["runs"])
    # an end-to-end run names the decoder its calls' stats record (forty-fifth session; older runs record none)
    decoder = {"tree_widths": [4, 16, 16, 16, 16], "rerank_leaves": True, "lookup_tokens": 32}
    runs = [{**run, "stats": {**run["stats"], **decoder}} if run["method"] == "longspec" else run for run in decode["runs"]]
    named = builder.build(None, {**decode, "runs": runs}, [])
    assert {run["method"] for run in named["runs"] if run.get("speedup")} == {
        "LongSpec tree 4-16-16-16-16, leaves re-ranked + 32-token lookup chain (greedy), end to end"}


def test_the_shipped_card_is_what_its_measurements_render(tmp_path, monkeypatch):
    """model_cards/longspec-smollm2-135m-instruct/ holds the card and measurements.json that
    benchmarks/shipped_card.py renders from the committed measurement JSONs and the draft folder:
    a number edited by hand, or a new measurement not rendered, fails here."""
    import shutil

    repo = REPO
    script = load_script("benchmarks/shipped_card.py")
    copy = tmp_path / "card"
    shutil.copytree(script.FOLDER, copy)
    monkeypatch.setattr(script, "FOLDER", copy)
    assert script.main([]) == 0
    shipped = repo / "model_cards" / "longspec-smollm2-135m-instruct"
    for name in ("README.md", "measurements.json"):
        assert (copy / name).read_text() == (shipped / name).read_text(), name



def test_a_checkout_serves_its_own_shipped_draft_and_kernels_over_another_installs(tmp_path):
    """A checkout run with PYTHONPATH=src serves its own model_cards and kernels even when an editable
    install of another tree (a git worktree's main checkout) maps those subpackages elsewhere: else the
    worktree's benchmarks and tests would quietly measure the other tree's shipped draft."""
    import subprocess

    root = REPO
    for name in ("kernels", "model_cards"):  # the other tree: empty subpackages
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("")
    code = f"""
import importlib.abc, importlib.util, sys
from pathlib import Path
class OtherInstall(importlib.abc.MetaPathFinder):  # what an editable install of another tree adds
    def find_spec(self, name, path=None, target=None):
        if name in ("hf_longspec.kernels", "hf_longspec.model_cards"):
            folder = Path({str(tmp_path)!r}) / name.split(".")[1]
            return importlib.util.spec_from_file_location(name, folder / "__init__.py",
                                                          submodule_search_locations=[str(folder)])
sys.meta_path.insert(0, OtherInstall())
import hf_longspec.kernels, hf_longspec.model_cards
print(Path(hf_longspec.model_cards.__file__).parent, Path(hf_longspec.kernels.__file__).parent)
"""
    env = {**os.environ, "PYTHONPATH": str(root / "src")}
    served = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert served.returncode == 0 and served.stdout.split() == [str(root / "model_cards"), str(root / "kernels")], served.stderr[-2000:]


def _other_draft(seed: int) -> LongSpecDraftModel:
    """A draft of draft_dir's shape with other weights (as a further training run would leave)."""
    draft = LongSpecDraftModel.from_target(tiny_llama(), tree_widths=[2, 2])
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in draft.parameters():
            parameter.add_(0.01 * torch.randn(parameter.shape, generator=generator))
    return draft


def _other_draft_digest(seed: int) -> str:
    from hf_longspec.publishing.weights_digest import model_weights_digest

    return model_weights_digest(_other_draft(seed))


def test_the_weights_digest_names_a_draft_in_any_dtype_and_nothing_else(draft_dir):
    """One name for a draft in float32, its bf16 copy and its folder; another value, another name."""
    from hf_longspec.publishing.weights_digest import DIGEST_PREFIX, folder_weights_digest, model_weights_digest

    draft = LongSpecDraftModel.from_pretrained(str(draft_dir), dtype=torch.float32)
    digest = model_weights_digest(draft)
    assert digest.startswith(DIGEST_PREFIX) and len(digest) == len(DIGEST_PREFIX) + 16
    assert folder_weights_digest(draft_dir) == digest == model_weights_digest(draft.to(torch.bfloat16))
    with torch.no_grad():
        next(draft.parameters()).view(-1)[0] += 1.0
    assert model_weights_digest(draft) != digest


def test_a_card_is_refused_for_weights_other_than_those_measured(draft_dir, tmp_path):
    """Measurements that name the weights they measured render only for those weights; the card then
    names them. Before the nineteenth session any folder took any measurement."""
    from hf_longspec.publishing.weights_digest import folder_weights_digest

    held = folder_weights_digest(draft_dir)
    runs = [{"task": "code", "prompt_tokens": 4096, "method": "LongSpec", "tau": 3.1}]
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"environment": {"draft weights": _other_draft_digest(7)}, "runs": runs}))
    with pytest.raises(ValueError, match=f"measured the draft weights bf16-sha256:.*but .* holds {held}"):
        render_card(draft_dir, TARGET_REPO, other, repo_id=DRAFT_REPO)
    these = tmp_path / "these.json"
    these.write_text(json.dumps({"environment": {"draft weights": held}, "runs": runs}))
    assert f"draft weights {held}" in render_card(draft_dir, TARGET_REPO, these, repo_id=DRAFT_REPO).text


def test_publish_checks_refuse_a_card_whose_draft_was_trained_again(draft_dir, tmp_path):
    """A folder whose weights changed after its card was rendered from measurements of the old ones
    must not publish the old numbers."""
    from hf_longspec.publishing.weights_digest import folder_weights_digest

    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps({"environment": {"draft weights": folder_weights_digest(draft_dir)},
                                 "runs": [{"task": "code", "prompt_tokens": 4096, "method": "LongSpec", "tau": 3.1}]}))
    write_card(draft_dir, TARGET_REPO, bench, repo_id=DRAFT_REPO)
    check_draft_folder(draft_dir, repo_id=DRAFT_REPO)
    _other_draft(11).save_pretrained(draft_dir)  # trained again
    with pytest.raises(DraftFolderError, match="states measurements of the draft weights .* but the folder holds"):
        check_draft_folder(draft_dir, repo_id=DRAFT_REPO)


def test_card_measurements_refuse_sources_of_other_weights(draft_dir):
    """card_measurements.build: sources that recorded their draft's weights must agree with each other
    and with the card's draft; sources from before digests name none and take the card's."""
    from hf_longspec.publishing.weights_digest import folder_weights_digest

    builder = load_script("benchmarks/card_measurements.py")
    held, other = folder_weights_digest(draft_dir), _other_draft_digest(7)
    tau = json.loads((REPO / "docs" / "results" / "candidate_gpu_eval_embedded_2026-12-01.json").read_text())
    assert "weights_digest" not in (tau.get("draft") or {})  # a source from before digests
    assert builder.build(tau, None, [], held)["environment"]["draft weights"] == held
    assert "draft weights" not in builder.build(tau, None, [])["environment"]
    with pytest.raises(ValueError, match=f"--tau: {other}.*the card's draft: {held}"):
        builder.build({**tau, "draft": {"weights_digest": other}}, None, [], held)
    decode = json.loads((REPO / "docs" / "results" / "decode_bench_h200_2026-12-01.json").read_text())
    with pytest.raises(ValueError, match="other draft weights"):
        builder.build({**tau, "draft": {"weights_digest": other}}, {**decode, "draft": {"weights_digest": held}}, [])


def test_the_card_names_every_target_layer_the_draft_reads():
    """A draft that also reads other target layers (extra_target_layer_indices) says so on its card."""
    from hf_longspec import LongSpecDraftConfig
    from hf_longspec.publishing.card import _layer_label

    assert _layer_label(LongSpecDraftConfig(target_num_hidden_layers=30)) == "29 (the last)"
    assert _layer_label(LongSpecDraftConfig(target_num_hidden_layers=30, extra_target_layer_indices=[4, -15])) \
        == "29 (the last), and also 4, 15"
