"""The embedded target's converted folder (hf_longspec/embedded.py): made once from the GGUF, it loads the
same weights, config and tokenizer as the GGUF itself, and is written so that no reader sees half of it."""

import copy

import torch

from hf_longspec import embedded as loading
from hf_longspec.corpus import long_prompt_ids


def test_the_converted_folder_loads_what_the_gguf_loads(embedded, tmp_path, monkeypatch):
    """The first load converts (here from the session's GGUF-loaded target, which stands in for a second read of
    the GGUF: 35 s), later loads read the folder: the same float32 weights, the same logits on real text, the
    same tokenizer and chat template; a second conversion racing the first leaves the first folder and no
    staging folder; HF_LONGSPEC_CACHE=off reads the GGUF."""
    reference, reference_tokenizer = embedded
    monkeypatch.setenv("HF_LONGSPEC_CACHE", str(tmp_path))
    conversions = []

    def read_gguf(path):
        conversions.append(path.name)
        return copy.deepcopy(reference)

    monkeypatch.setattr(loading, "_read_gguf_model", read_gguf)
    monkeypatch.setattr(loading, "_gguf_tokenizer", lambda path: reference_tokenizer)
    model, tokenizer = loading.load_embedded_target(device="cpu")
    folder = loading.converted_folder(tmp_path, loading.embedded_gguf_path())
    assert conversions == [loading.EMBEDDED_GGUF] and model.config.name_or_path == str(folder)
    assert loading.load_embedded_target(device="cpu")[0].config.name_or_path == str(folder)
    assert len(conversions) == 1  # the second load read the folder
    assert not getattr(model, "is_quantized", False) and "quantization_config" not in model.config.to_dict()

    theirs = reference.state_dict()
    mine = model.state_dict()
    assert mine.keys() == theirs.keys()
    assert all(torch.equal(mine[name], theirs[name]) for name in mine)
    ids = torch.tensor([long_prompt_ids(reference_tokenizer, 256, kind="prose", split="eval", seed=3)])
    with torch.no_grad():
        assert torch.equal(model(ids).logits, reference(ids).logits)
    text = (folder / "config.json").read_text()[:400] + " Grüße, 世界 <|im_start|>user"
    assert tokenizer(text).input_ids == reference_tokenizer(text).input_ids
    chat = [{"role": "user", "content": "Summarize the document."}]
    assert tokenizer.apply_chat_template(chat, tokenize=False) == reference_tokenizer.apply_chat_template(chat, tokenize=False)
    assert loading.load_tokenizer().name_or_path == str(folder)  # prompt-cutting scripts read the folder too

    loading.save_converted(copy.deepcopy(reference), reference_tokenizer, folder)  # a racing second process
    assert [p.name for p in tmp_path.iterdir()] == [folder.name]
    monkeypatch.setenv("HF_LONGSPEC_CACHE", "off")
    assert loading.converted_cache_root() is None and loading.converted_embedded_folder() is None


def test_the_converted_folder_is_named_by_the_gguf_s_bytes_not_its_file_time(tmp_path):
    """A reinstall writes the same GGUF with a new modification time: it must find the folder converted before, not
    convert 0.5 GB again beside it. Other bytes (another release of the same size) must get a folder of their own."""
    import os

    gguf = tmp_path / loading.EMBEDDED_GGUF
    gguf.write_bytes(b"GGUF" + bytes(range(256)) * 64)
    first = loading.converted_folder(tmp_path / "cache", gguf)
    os.utime(gguf, ns=(gguf.stat().st_atime_ns, gguf.stat().st_mtime_ns + 10**12))  # "reinstalled" later
    assert loading.converted_folder(tmp_path / "cache", gguf) == first
    changed = bytearray(gguf.read_bytes())
    changed[100] ^= 1
    gguf.write_bytes(bytes(changed))
    assert loading.converted_folder(tmp_path / "cache", gguf) != first
    assert first.parent == tmp_path / "cache" and first.name.startswith(gguf.stem)


def test_the_embedded_tokenizer_has_the_special_tokens_the_gguf_declares(embedded):
    """SmolLM2's GGUF declares bos <|im_start|>, eos = pad <|im_end|>. transformers 5.17 (this project's lower bound,
    the GPU machine's) built its tokenizer with eos = bos and no pad token, so padding a batch failed ("Asking to pad
    but the tokenizer does not have a padding token": benchmarks/batch_exactness.py under 5.17, fifty-second session)
    and a chat pipeline's tokenizer-side eos was <|im_start|>; the loader now sets them from the GGUF's ids. The
    tokenizer's ids must be the model's own (its generation config, read from the same GGUF)."""
    model, tokenizer = embedded
    assert tokenizer.convert_ids_to_tokens([1, 2]) == ["<|im_start|>", "<|im_end|>"]
    assert (tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id) == (1, 2, 2)
    assert tokenizer.eos_token_id == model.generation_config.eos_token_id
    assert tokenizer.pad_token_id == model.generation_config.pad_token_id
    padded = tokenizer.pad({"input_ids": [[5, 6, 7], [8]]}, padding_side="left", return_tensors="pt")
    assert padded["input_ids"][1].tolist() == [2, 2, 8] and padded["attention_mask"][1].tolist() == [0, 0, 1]


def test_a_converted_folder_made_before_the_special_tokens_fix_is_read_with_the_gguf_s_tokens(embedded, tmp_path,
                                                                                                 monkeypatch):
    """A folder converted under transformers 5.17 before 8bf98b2 holds the tokenizer that version built (eos = bos,
    no pad) and keeps its name, which is keyed by the GGUF's bytes and the transformers version: read from it, the
    tokenizer must still get the GGUF's bos/eos/pad, or batch padding fails there as it did before the fix."""
    _, tokenizer = embedded
    monkeypatch.setenv("HF_LONGSPEC_CACHE", str(tmp_path))
    folder = loading.converted_folder(tmp_path, loading.embedded_gguf_path())
    stale = copy.deepcopy(tokenizer)
    stale.pad_token, stale.eos_token = None, stale.bos_token
    stale.save_pretrained(folder)
    (folder / "config.json").write_text("{}")  # the mark of a whole folder; only the tokenizer is read here
    assert (stale.pad_token_id, stale.eos_token_id) == (None, 1)

    loaded = loading.load_tokenizer()
    assert loaded.name_or_path == str(folder)
    assert (loaded.bos_token_id, loaded.eos_token_id, loaded.pad_token_id) == (1, 2, 2)
    assert loaded.pad({"input_ids": [[5, 6], [8]]}, padding_side="left")["input_ids"][1] == [2, 8]
