"""The training corpus: sources, the train / eval split by file, mixing weights, chat data."""

import gzip
import json
import random
import struct
from pathlib import Path

import pytest
import torch

from conftest import ByteTokenizer, load_script, tiny_llama
from hf_longspec.corpus import (
    KINDS, MIX_PRESETS, SOURCES, CorpusRoots, clear_caches, corpus_report, documents, format_report, long_prompt_ids,
    mo_strings, parse_mix, plan_mix, po_strings, read_document, roff_to_text, split_of,
)
from hf_longspec.training.chat_data import (
    build_chat_prompts, chat_records, generate_chat_answers, read_chat_jsonl, write_chat_jsonl,
)
from hf_longspec.training.data import LocalTextChunks

WORDS = ("the quick brown fox jumps over lazy dogs while seven wizards quietly judge boxing matches "
         "in a small town near the river where every file tells a story about code and people").split()


def prose(rng, words=120):
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + ".\n"


def mo_file(pairs):
    """A little-endian gettext .mo with a UTF-8 header and the given (msgid, msgstr) pairs."""
    entries = [(b"", b"Content-Type: text/plain; charset=UTF-8\n")] + [
        (a.encode(), b.encode()) for a, b in pairs]
    count = len(entries)
    originals, translations = 28, 28 + 8 * count
    data_start = 28 + 16 * count
    blob, otable, ttable = b"", b"", b""
    for msgid, _ in entries:
        otable += struct.pack("<2I", len(msgid), data_start + len(blob))
        blob += msgid + b"\0"
    for _, msgstr in entries:
        ttable += struct.pack("<2I", len(msgstr), data_start + len(blob))
        blob += msgstr + b"\0"
    return struct.pack("<7I", 0x950412DE, 0, count, originals, translations, 0, 0) + otable + ttable + blob


ROFF = r""".\" a comment
.TH TOOL 1 "2026" "tool 1.0"
.SH NAME
tool \- does \fBthings\fR with files
.SH DESCRIPTION
.B tool
reads \fIfiles\fP and writes \(lqreports\(rq.
.TP
.BR \-v ", " \-\-verbose
Say more.
"""


def fake_machine(root, files_per_source=30, seed=0):
    """A small machine tree with every kind of file the sources read; returns its CorpusRoots."""
    rng = random.Random(seed)
    site, share, stdlib = root / "site-packages", root / "share", root / "stdlib"

    def write(path, text, gz=False):
        path.parent.mkdir(parents=True, exist_ok=True)
        if gz:
            path.write_bytes(gzip.compress(text.encode()))
        else:
            path.write_text(text)

    for i in range(3 * files_per_source):  # code is the biggest source, as on real machines
        write(site / "pkg_a" / f"mod{i}.py", f'"""Module {i}."""\n\n' + "".join(
            f"def f{j}(x):\n    return x * {j} + {i}  # {prose(rng, 6).strip()}\n\n" for j in range(12)))
    for i in range(files_per_source):
        write(stdlib / f"lib{i}.py", "import os\n\n" + "".join(f"VALUE_{j} = {j * i}\n" for j in range(60)))
        write(site / "pkg_a" / "docs" / f"guide{i}.md", f"# Guide {i}\n\n" + prose(rng))
        write(share / "doc" / f"tool{i}" / "changelog.Debian.gz",
              f"tool ({i}.0) stable; urgency=low\n\n  * " + prose(rng), gz=True)
        write(share / "doc" / f"tool{i}" / "README", prose(rng))
        write(share / "doc" / f"tool{i}" / "copyright", "Copyright 2026 Someone.\n\n" + prose(rng))
        write(share / "man" / "man1" / f"tool{i}.1.gz", ROFF + prose(rng), gz=True)
        write(share / "man" / "de" / "man1" / f"tool{i}.1.gz",
              ROFF.replace("Say more.", "Mehr sagen.") + "Dies ist eine deutsche Seite über Dateien. " * 12, gz=True)
        (share / "locale" / "fr" / "LC_MESSAGES").mkdir(parents=True, exist_ok=True)
        (share / "locale" / "fr" / "LC_MESSAGES" / f"tool{i}.mo").write_bytes(
            mo_file([(f"Cannot open file {j}", f"Impossible d'ouvrir le fichier numéro {j}") for j in range(20)]))
    write(site / "pkg_a-1.0.dist-info" / "METADATA", "Metadata-Version: 2.1\nName: pkg-a\n\n" + prose(rng))
    write(site / "pkg_a-1.0.dist-info" / "licenses" / "LICENSE", "MIT License\n\n" + prose(rng))
    write(site / "pkg_a" / "CHANGELOG.md", "# Changes\n\n" + prose(rng))
    write(site / "pkg_a" / "data" / "numbers.txt", "1 2 3 4 5 6 7 8 9\n" * 100)  # data, not docs
    write(share / "common-licenses" / "GPL-3", "GNU GENERAL PUBLIC LICENSE\n\n" + prose(rng, 400))
    for copy in ("dup-a", "dup-b"):  # one text under two paths: read once
        write(share / "doc" / copy / "README", "The same readme text in two packages. " * 20)
    write(share / "man" / "man1" / "alias.1.gz", ".so man1/tool0.1\n" + " " * 400, gz=True)  # an alias page
    return CorpusRoots(site_packages=(site,), stdlib=stdlib, usr_share=share)


@pytest.fixture(scope="module")
def machine(tmp_path_factory):
    return fake_machine(tmp_path_factory.mktemp("machine"))


def test_every_source_yields_text_and_readers_clean_up(machine):
    for source in SOURCES:
        texts = [read_document(d) for d in documents(source, "all", roots=machine)]
        assert any(texts), source
    man = read_document(documents("man", "all", roots=machine)[0])
    assert "does things with files" in man and "\\f" not in man and ".SH" not in man and "\u201creports\u201d" in man
    assert "-v, --verbose" in man
    multilingual = " ".join(read_document(d) for d in documents("multilingual", "all", roots=machine))
    assert "Impossible d'ouvrir le fichier" in multilingual and "Mehr sagen." in multilingual
    assert "Cannot open file" not in multilingual  # only the translations
    keys = {d.key for source in SOURCES for d in documents(source, "all", roots=machine)}
    assert "pkg_a/data/numbers.txt" not in keys
    assert "man/man1/alias.1.gz" not in {d.key for d in documents("man", "all", roots=machine) if read_document(d)}
    assert len({"doc/dup-a/README", "doc/dup-b/README"} & {d.key for d in documents("docs", "all", roots=machine)}) == 1
    assert "doc/tool3/copyright" in {d.key for d in documents("licenses", "all", roots=machine)}
    assert "doc/tool3/changelog.Debian.gz" in {d.key for d in documents("changelog", "all", roots=machine)}


def test_empty_machine_reports_zeros_without_crashing(tmp_path):
    empty = CorpusRoots(site_packages=(tmp_path,), stdlib=None, usr_share=None)
    report = corpus_report(mix="wide", roots=empty)
    assert set(report) == set(SOURCES)
    assert all(row[split]["files"] == 0 for row in report.values() for split in ("train", "eval"))
    assert "| total |" in format_report(report)
    with pytest.raises(ValueError, match="no local text"):
        LocalTextChunks(ByteTokenizer(), 64, 10_000, mix="wide", roots=empty)


def test_split_is_by_file_disjoint_and_deterministic(machine):
    assert split_of("numpy/_core/numeric.py") == split_of("numpy/_core/numeric.py")
    assert [split_of(f"pkg/m{i}.py") for i in range(40)].count("eval") in range(1, 12)
    train_paths, eval_paths = set(), set()
    for source in SOURCES:
        train = documents(source, "train", roots=machine)
        held = documents(source, "eval", roots=machine)
        every = documents(source, "all", roots=machine)
        assert {d.key for d in train} | {d.key for d in held} == {d.key for d in every}
        assert all(d.split == "train" for d in train) and all(d.split == "eval" for d in held)
        train_paths |= {d.path for d in train}
        eval_paths |= {d.path for d in held}
    assert eval_paths and not train_paths & eval_paths
    clear_caches()
    again = {d.path for source in SOURCES for d in documents(source, "eval", roots=machine)}
    assert again == eval_paths


def test_this_machine_every_source_reports_and_splits_apart():
    """The real machine: each source yields text or reports zero files; no file on both sides."""
    report = corpus_report(max_files=2)
    for source in SOURCES:
        row = report[source]
        assert row["train"]["files"] + row["train"]["rejected"] <= 2 and row["train"]["chars"] >= 0
    train = {d.path for source in KINDS for d in documents(source, "train")}
    held = {d.path for source in KINDS for d in documents(source, "eval")}
    assert not train & held


def test_parse_mix_presets_and_specs():
    for name in MIX_PRESETS:
        assert abs(sum(parse_mix(name).values()) - 1) < 1e-9
    assert parse_mix(None) == parse_mix("wide")
    assert parse_mix("code=2,man=1,docs=1") == {"code": 0.5, "docs": 0.25, "man": 0.25}
    with pytest.raises(ValueError, match="unknown corpus sources"):
        parse_mix("novels=1")
    with pytest.raises(ValueError):
        parse_mix("code")
    # a source smaller than its share gives the rest to the others, in proportion to their weights
    assert plan_mix({"a": 0.5, "b": 0.25, "c": 0.25}, {"a": 10}, 110) == {"a": 10, "b": 50, "c": 50}
    assert plan_mix({"a": 0.5, "b": 0.5}, {"a": 10}, 100, max_epochs=2) == {"a": 20, "b": 80}
    assert plan_mix({"a": 0.5, "b": 0.5}, {}, 100) == {"a": 50, "b": 50}


def test_loader_respects_mixing_weights_and_redistributes(machine):
    weights = {"code": 0.5, "man": 0.3, "docs": 0.2}
    data = LocalTextChunks(ByteTokenizer(), 64, 20_000, mix=weights, roots=machine, seed=1)
    shares = data.source_shares()
    for name, weight in weights.items():
        assert abs(shares[name] - weight) < 0.03, (name, shares)
        assert not data.mix_report[name]["short"]
    again = LocalTextChunks(ByteTokenizer(), 64, 20_000, mix=weights, roots=machine, seed=1)
    assert torch.equal(data.chunks, again.chunks)
    # licenses are too small for half of 60k tokens: their share goes to code
    small = LocalTextChunks(ByteTokenizer(), 64, 60_000, mix={"code": 0.5, "licenses": 0.5}, roots=machine)
    assert small.mix_report["licenses"]["short"] and small.mix_report["licenses"]["share"] < 0.5
    assert abs(sum(row["share"] for row in small.mix_report.values()) - 1) < 1e-9
    licenses = sum(len(read_document(d).encode()) + 1 for d in documents("licenses", "train", roots=machine))
    assert licenses - 64 < small.mix_report["licenses"]["tokens"] <= licenses  # all of it, in whole chunks
    assert len(small) * 64 > 0.9 * 60_000
    # two passes allowed: the small source keeps more of its share
    twice = LocalTextChunks(ByteTokenizer(), 64, 60_000, mix={"code": 0.5, "licenses": 0.5}, roots=machine,
                            max_epochs=2)
    assert twice.mix_report["licenses"]["tokens"] > small.mix_report["licenses"]["tokens"]


def test_legacy_kinds_and_new_prompt_kinds(machine):
    data = LocalTextChunks(ByteTokenizer(), 64, 5_000, kinds=("code", "prose"), roots=machine)
    assert len(data) == 5_000 // 64 and data.mix_report is None
    for kind in ("docs", "man", "changelog", "multilingual"):
        ids = long_prompt_ids(ByteTokenizer(), 300, kind=kind, split="train", roots=machine)
        assert len(ids) == 300


def test_roff_and_catalog_readers():
    mdoc = ".Dd today\n.Dt SSH 1\n.Sh NAME\n.Nm ssh\n.Nd remote login\n.Sh SYNOPSIS\n.Nm\n.Op Fl v\n"
    text = roff_to_text(mdoc)
    assert "NAME" in text and "ssh - remote login" in text.replace("\n", " ") and "-v" in text
    assert roff_to_text(".so man1/other.1\n") == ""
    macros = '.de URL\n\\fI\\$2\\fP\n..\n.if \\n[.g] \\{\\\n.  am URL\n.    ad l\n.  .\n.\\}\n.SH "NAME"\nkept\n'
    assert roff_to_text(macros).split() == ["NAME", "kept"]  # macro bodies end at ".." or ".  ."
    assert mo_strings(mo_file([("Hello", "Hallo"), ("Bye", "Tschüss")])) == ["Hallo", "Tschüss"]
    po = 'msgid ""\nmsgstr "Content-Type: text/plain\\n"\n\nmsgid "Open"\nmsgstr ""\n"Öff"\n"nen"\n'
    assert po_strings(po) == ["Öffnen"]


def chat_tokenizer():
    """A tiny byte-level tokenizer with a chat template (no download)."""
    from tokenizers import Tokenizer, decoders, models
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(ByteLevel.alphabet())
    backend = Tokenizer(models.BPE(vocab={ch: i for i, ch in enumerate(alphabet)}, merges=[]))
    backend.pre_tokenizer = ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|im_end|>",
                                        additional_special_tokens=["<|im_start|>"])
    tokenizer.chat_template = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
                               "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    return tokenizer


def test_chat_data_round_trip(machine, tmp_path):
    tokenizer = chat_tokenizer()
    target = tiny_llama(vocab_size=len(tokenizer), max_positions=1024)
    prompts = build_chat_prompts(tokenizer, 4, document_tokens=120, sources=("code", "man", "multilingual"),
                                 split="train", roots=machine, seed=2)
    assert len(prompts) == 4 and {p.source for p in prompts} == {"code", "man", "multilingual"}
    first = tokenizer.decode(prompts[0].input_ids)
    assert first.startswith("<|im_start|>user\n") and first.endswith("<|im_start|>assistant\n")
    assert all(split_of(key) == "train" for p in prompts for key in p.files)
    sequences = generate_chat_answers(target, tokenizer, prompts, max_new_tokens=6)
    assert all(s[:len(p.input_ids)] == p.input_ids and len(s) == len(p.input_ids) + 6
               for p, s in zip(prompts, sequences))
    # answered in left-padded batches (prompts of different lengths): the same sequences, each cut at its eos
    assert len({len(p.input_ids) for p in prompts}) > 1
    assert generate_chat_answers(target, tokenizer, prompts, max_new_tokens=6, batch_size=3) == sequences
    path = write_chat_jsonl(tmp_path / "chat.jsonl", chat_records(prompts, sequences, tokenizer))
    records = read_chat_jsonl(path, split="train")
    assert [r["input_ids"] for r in records] == sequences and records[0]["answer_tokens"] == 6
    assert read_chat_jsonl(path, split="eval") == []
    held = build_chat_prompts(tokenizer, 2, document_tokens=120, sources=("code",), split="eval", roots=machine)
    assert all(split_of(key) == "eval" for p in held for key in p.files)
    # the loader mixes the records in as the source "chat"
    mixed = LocalTextChunks(tokenizer, 32, 2_000, mix="code=0.5,chat=0.5", chat_data=[str(path)], roots=machine)
    chat_rows = mixed.chunks[mixed.chunk_sources == mixed.source_names.index("chat")]
    assert len(chat_rows) > 0
    flat = chat_rows.flatten().tolist()
    assert any(flat[:len(s)] == s for s in sequences)


def test_chat_windows_end_give_each_record_one_chunk_ending_at_its_answer(machine, tmp_path):
    """chat_windows='end': every record becomes one chunk whose last tokens are the record's end
    (answer, then eos), with the record's own tokens (or the previous record's tail) before them;
    'stream' cuts the same records wherever the token stream falls. Bad values are refused."""
    tokenizer = ByteTokenizer()
    eos = tokenizer.eos_token_id
    rng = random.Random(5)
    records = [[rng.randrange(1, 200) for _ in range(length)] for length in (90, 20, 150, 64, 40, 200)]
    path = tmp_path / "records.jsonl"
    path.write_text("".join(
        __import__("json").dumps({"input_ids": ids, "split": "train", "source": "code", "task": "continue",
                                  "files": [], "answer_tokens": 4}) + "\n" for ids in records))
    aligned = LocalTextChunks(tokenizer, 64, 10_000, mix="chat=1", chat_data=[str(path)], chat_windows="end")
    rows = [row.tolist() for row in aligned.chunks]
    cut = LocalTextChunks(tokenizer, 64, 10_000, mix="chat=1", chat_data=[str(path)])
    stream = cut.chunks.flatten().tolist()  # the records in the loader's (seeded) order, cut every 64 tokens
    order = []
    while len(order) < len(records):  # recover that order from the stream
        at = sum(len(records[i]) + 1 for i in order)
        order.append(next(i for i, ids in enumerate(records) if i not in order and stream[at:at + 10] == ids[:10]
                          or (at + 10 > len(stream) and i not in order)))
    full = [t for i in order for t in records[i] + [eos]]
    assert stream == full[:len(full) // 64 * 64]
    ends = [sum(len(records[i]) + 1 for i in order[:k + 1]) for k in range(len(order))]
    windows = [full[end - 64:end] for end in ends if end >= 64]  # a record too early for 64 tokens has none
    assert rows == windows and len(rows) >= len(records) - 1
    assert all(row[-1] == eos and any(row[-5:-1] == ids[-4:] for ids in records) for row in rows)
    assert aligned.mix_report["chat"]["short"] and aligned.mix_report["chat"]["tokens"] == 64 * len(rows)
    with pytest.raises(Exception, match="chat_windows='middle'; allowed"):
        LocalTextChunks(tokenizer, 64, 10_000, mix="chat=1", chat_data=[str(path)], chat_windows="middle")
    from hf_longspec.training.run import TrainRecipe  # the CLI's recipe refuses it before loading anything

    with pytest.raises(Exception, match="chat_windows='middle'; allowed"):
        TrainRecipe(output_dir=str(tmp_path / "run"), chat_windows="middle").check()


def _records_with_marked_answers(path, rng, lengths=((70, 20), (30, 9), (120, 40), (50, 1), (16, 30), (90, 60))):
    """Records whose prompt tokens are 1..99 and answer tokens 100..199, so a chunk's tokens tell which
    is which; the first three name where their answer starts by prompt_tokens, the rest by answer_tokens."""
    import json

    lines = []
    for index, (prompt, answer) in enumerate(lengths):
        ids = [rng.randrange(1, 100) for _ in range(prompt)] + [rng.randrange(100, 200) for _ in range(answer)]
        where = {"prompt_tokens": prompt} if index < 3 else {"answer_tokens": answer}
        lines.append(json.dumps({"input_ids": ids, "split": "train", "source": "chat", "origin": "code",
                                 "task": "continue", "files": [], **where}) + "\n")
    path.write_text("".join(lines))
    return path


@pytest.mark.parametrize("windows", ["stream", "end"])
def test_prompt_mask_marks_what_the_target_did_not_write(machine, tmp_path, windows):
    """prompt_mask is True exactly at a chat record's prompt tokens and the separator after it, False
    at its answer and at all corpus text; the collator turns it into the loss mask only when asked
    (answer_only), and a record that does not say where its answer starts is refused."""
    from hf_longspec.training.collator import LongSpecCollator

    tokenizer = ByteTokenizer()
    path = _records_with_marked_answers(tmp_path / "records.jsonl", random.Random(3))
    mixed = LocalTextChunks(tokenizer, 48, 3_000, mix="code=0.5,chat=0.5", chat_data=[str(path)], roots=machine,
                            max_epochs=3.0, chat_windows=windows)
    chat = mixed.chunk_sources == mixed.source_names.index("chat")
    assert chat.any() and (~chat).any() and mixed.prompt_mask.shape == mixed.chunks.shape
    rows, masks = mixed.chunks[chat], mixed.prompt_mask[chat]
    written_by_target = (rows >= 100) & (rows < 200)
    assert torch.equal(masks, ~written_by_target)  # prompts (1..99) and separators (eos) are masked
    assert written_by_target.any() and (rows == tokenizer.eos_token_id).any()
    assert not mixed.prompt_mask[~chat].any()  # corpus text is never masked
    if windows == "end":
        # each chunk ends in its record's answer, then the separator
        assert all(row[-1] == tokenizer.eos_token_id and 100 <= row[-2] < 200 for row in rows.tolist())
    items = [mixed[i] for i in range(len(mixed))]
    assert all(torch.equal(item["prompt_mask"], mixed.prompt_mask[i]) for i, item in enumerate(items))
    collate = LongSpecCollator(max_positions=4096, seed=0)
    answer_only = LongSpecCollator(max_positions=4096, seed=0, answer_only=True)
    rows_of_both = [int(i) for i in chat.nonzero()[:3, 0]] + [int((~chat).nonzero()[0, 0])]
    picked = [items[i] for i in rows_of_both]
    assert "loss_mask" not in collate(picked)
    assert torch.equal(answer_only(picked)["loss_mask"], ~mixed.prompt_mask[rows_of_both])
    code_only = LocalTextChunks(tokenizer, 48, 3_000, mix="code=1", roots=machine)
    assert "prompt_mask" not in code_only[0]
    with pytest.raises(ValueError, match="answer_only needs every row's prompt_mask"):
        answer_only([code_only[0], code_only[1]])
    import json

    for record, message in (({"input_ids": [1, 2, 3], "split": "train"}, "neither prompt_tokens nor answer_tokens"),
                            ({"input_ids": [1, 2, 3], "split": "train", "prompt_tokens": 3}, "leaves no answer")):
        path.write_text(json.dumps({"input_ids": [4, 5], "split": "train", "prompt_tokens": 1}) + "\n"
                        + json.dumps(record) + "\n")
        with pytest.raises(ValueError, match=f"chat record 2 of {path}.*{message}"):
            LocalTextChunks(tokenizer, 2, 100, mix="chat=1", chat_data=[str(path)])


def test_continuation_prompts_are_bare_documents_the_target_continues(machine):
    """With continuation_share, prompts are the plain document (no chat template, task "continue");
    at share 0 the prompts are exactly the chat prompts of before (same seed, same draws)."""
    tokenizer = chat_tokenizer()
    kwargs = dict(document_tokens=120, sources=("code", "man"), split="train", roots=machine, seed=3)
    chat = build_chat_prompts(tokenizer, 6, **kwargs)
    # the tasks that seed 3 drew before continuation prompts existed (commit e43d333)
    assert [p.task for p in chat] == ["explain", "key-points", "review", "explain", "summarize", "summarize"]
    assert build_chat_prompts(tokenizer, 6, continuation_share=0.0, **kwargs) == chat
    bare = build_chat_prompts(tokenizer, 6, continuation_share=1.0, **kwargs)
    assert [p.task for p in bare] == ["continue"] * 6 and [p.files for p in bare] == [p.files for p in chat]
    for prompt in bare:
        text = tokenizer.decode(prompt.input_ids)
        assert "<|im_start|>" not in text and text == text.strip() and len(prompt.input_ids) >= 100
    assert all(tokenizer.decode(b.input_ids) in tokenizer.decode(c.input_ids) for b, c in zip(bare, chat))
    mixed = build_chat_prompts(tokenizer, 12, continuation_share=0.5, **kwargs)
    assert {"continue"} < {p.task for p in mixed}
    with pytest.raises(ValueError, match="continuation_share must be in"):
        build_chat_prompts(tokenizer, 2, continuation_share=1.5, **kwargs)


def test_recipe_defaults_to_the_wide_mix_and_cli_options():
    from hf_longspec.cli import build_parser
    from hf_longspec.training.run import TrainRecipe

    assert TrainRecipe(output_dir="x").corpus_mix == "wide"
    assert TrainRecipe(output_dir="x", kinds=["code", "prose"]).corpus_mix is None
    args = build_parser().parse_args(["train", "--output", "x", "--corpus-mix", "code=0.6,man=0.4",
                                      "--chat-data", "a.jsonl"])
    assert args.corpus_mix == "code=0.6,man=0.4" and args.chat_data == ["a.jsonl"]


def test_train_passes_only_the_draft_settings_asked_for(tmp_path, capsys):
    """--sliding-window, --intermediate-size, --cross-attention-length-scale, --cross-attention-window,
    --target-entry-input,
    --target-layer-index and --extra-target-layer-indices reach the recipe's
    draft_overrides only when given (a draft
    continued with --init-draft keeps its own otherwise); a width below 1, and --chat-loss answer without
    chat records, are refused by name, before any target is loaded."""
    from hf_longspec.cli import build_parser, draft_overrides, main

    parse = build_parser().parse_args
    assert draft_overrides(parse(["train", "--output", "x"])) == {}
    assert draft_overrides(parse(["train", "--output", "x", "--intermediate-size", "4608"])) == {"intermediate_size": 4608}
    assert draft_overrides(parse(["train", "--output", "x", "--sliding-window", "256", "--intermediate-size", "4608"])) \
        == {"sliding_window": 256, "intermediate_size": 4608}
    assert draft_overrides(parse(["train", "--output", "x", "--cross-attention-length-scale", "2048"])) \
        == {"cross_attention_length_scale": 2048}
    assert draft_overrides(parse(["train", "--output", "x", "--target-entry-input"])) == {"target_entry_input": True}
    assert draft_overrides(parse(["train", "--output", "x", "--target-layer-index", "-8"])) == {"target_layer_index": -8}
    assert draft_overrides(parse(["train", "--output", "x", "--extra-target-layer-indices", "4", "15"])) \
        == {"extra_target_layer_indices": [4, 15]}
    assert main(["train", "--output", str(tmp_path / "run"), "--cross-attention-length-scale", "0"]) == 2
    assert "--cross-attention-length-scale 0: allowed: an int >= 1." in capsys.readouterr().err
    assert main(["train", "--output", str(tmp_path / "run"), "--intermediate-size", "0"]) == 2
    assert "--intermediate-size 0: allowed: an int >= 1." in capsys.readouterr().err
    assert draft_overrides(parse(["train", "--output", "x", "--cross-attention-window", "2048"])) \
        == {"cross_attention_window": 2048}
    assert main(["train", "--output", str(tmp_path / "run"), "--cross-attention-window", "0"]) == 2
    assert "--cross-attention-window 0: allowed: an int >= 1." in capsys.readouterr().err
    # --chat-loss reaches the recipe, which refuses an answer loss without chat records before loading
    assert main(["train", "--output", str(tmp_path / "run"), "--chat-loss", "answer"]) == 2
    assert "chat_loss='answer' takes the loss on chat records' answers" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
    # --data-cache reaches the recipe, which refuses a path that is a file before loading
    (tmp_path / "a_file").write_text("x")
    assert main(["train", "--output", str(tmp_path / "run"), "--data-cache", str(tmp_path / "a_file")]) == 2
    assert f"data_cache='{tmp_path / 'a_file'}' exists and is not a folder" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def _pack_script():
    return load_script("benchmarks/pack_text.py")


def test_a_packed_split_reads_on_another_machine_as_it_does_here(machine, tmp_path, monkeypatch):
    """benchmarks/pack_text.py copies one split's /usr/share files of a source, same relative paths;
    read through HF_LONGSPEC_USR_SHARE, the copy gives the same documents, keys and text, and none of
    the other split (the GPU machine's multilingual eval prompts come from such a copy; the fake
    machine is too small for an eval split of every source, so this packs its train split)."""
    from hf_longspec.corpus import USR_SHARE_ENV, CorpusRoots, default_roots

    manifest = _pack_script().pack(tmp_path / "pack", ["multilingual", "man"], "train", machine)
    here = {source: [d for d in documents(source, "train", roots=machine)
                     if machine.usr_share in d.path.parents] for source in ("multilingual", "man")}
    assert manifest["sources"] == {source: len(docs) for source, docs in here.items()} and manifest["bytes"] > 0
    assert all(here.values())
    monkeypatch.setenv(USR_SHARE_ENV, str(tmp_path / "pack"))
    default_roots.cache_clear()
    try:
        roots = CorpusRoots.detect()
        assert roots.usr_share == tmp_path / "pack"
        there = CorpusRoots(usr_share=roots.usr_share)
        for source, docs in here.items():
            packed = documents(source, "train", roots=there)
            assert [d.key for d in packed] == [d.key for d in docs]
            assert [read_document(d) for d in packed] == [read_document(d) for d in docs]
            assert not list(documents(source, "eval", roots=there))
    finally:
        monkeypatch.delenv(USR_SHARE_ENV)
        default_roots.cache_clear()


def test_chat_data_time_budget_keeps_the_answered_prefix(machine):
    """make_chat_data's --time-budget: a spent budget stops before the next group of batches (the first
    always runs), and what was answered equals the unbudgeted answers' prefix."""
    make_chat_data = load_script("benchmarks/make_chat_data.py")
    tokenizer = chat_tokenizer()
    target = tiny_llama(vocab_size=len(tokenizer), max_positions=1024)
    prompts = build_chat_prompts(tokenizer, 6, document_tokens=60, sources=("code", "man"), split="train",
                                 roots=machine, seed=3)
    everything = make_chat_data.answer_in_groups(target, tokenizer, prompts, 4, 1, started=0.0)
    assert len(everything) == 6
    spent = make_chat_data.answer_in_groups(target, tokenizer, prompts, 4, 1, started=0.0, time_budget=0.0)
    assert spent == everything[:4]  # one group of 4 x batch_size 1



def test_chat_data_no_compile_reaches_generate(monkeypatch, tmp_path):
    """make_chat_data --no-compile hands longspec_compile=False to every generate() call beside the draft
    (compiling each new batch shape took the tenth session's whole data budget); without it the
    generation default stands."""
    import hf_longspec.demo

    make_chat_data = load_script("benchmarks/make_chat_data.py")
    tokenizer = chat_tokenizer()
    target = tiny_llama(vocab_size=len(tokenizer), max_positions=1024)
    monkeypatch.setattr(make_chat_data, "_load_target", lambda *args: (target, tokenizer))
    monkeypatch.setattr(hf_longspec.demo, "load_draft_for", lambda target, draft: ("the draft", draft))
    seen = []

    def answer(target, tokenizer, prompts, max_new_tokens, batch_size, started, time_budget=None, **kwargs):
        seen.append(kwargs)
        return [list(p.input_ids) + [1] for p in prompts]

    monkeypatch.setattr(make_chat_data, "answer_in_groups", answer)
    common = ["--num-prompts", "2", "--document-tokens", "40", "--sources", "code", "--draft", "embedded"]
    assert make_chat_data.main(["--out", str(tmp_path / "a.jsonl"), *common, "--no-compile"]) == 0
    assert make_chat_data.main(["--out", str(tmp_path / "b.jsonl"), *common]) == 0
    assert seen == [{"assistant_model": "the draft", "longspec_compile": False}, {"assistant_model": "the draft"}]

def test_a_shuffled_capped_pack_samples_beyond_the_first_folders(machine, tmp_path):
    """pack_text.py --shuffle-seed: under a byte cap, a seeded random sample of the split's files,
    not the leading ones (the plain order reads catalogs language by language; the fake machine's
    distinct files are its English man pages)."""
    pack = _pack_script().pack
    whole = pack(tmp_path / "whole", ["man"], "all", machine)["files"]["man"]
    assert len(whole) >= 3
    sizes = {key: (machine.usr_share / key).stat().st_size for key in whole}
    cap = sum(sizes[key] for key in whole[:2])
    ordered = pack(tmp_path / "ordered", ["man"], "all", machine, cap)["files"]["man"]
    assert ordered == whole[:2]
    picks = {tuple(pack(tmp_path / f"s{seed}", ["man"], "all", machine, cap, shuffle_seed=seed)
                   ["files"]["man"]) for seed in range(8)}
    assert all(sum(sizes[key] for key in p) <= cap for p in picks)
    assert any(set(p) - set(whole[:2]) for p in picks)  # some seed reaches past the leading files
    assert pack(tmp_path / "again", ["man"], "all", machine, cap, shuffle_seed=0)["files"]["man"] \
        == list(pack(tmp_path / "s0b", ["man"], "all", machine, cap, shuffle_seed=0)["files"]["man"])


def test_a_pack_capped_per_source_keeps_every_source(machine, tmp_path):
    """pack_text.py --max-mb-each: each source stops at its own cap, so a small pack holds some of every
    source instead of the first source alone."""
    pack = _pack_script().pack
    whole = pack(tmp_path / "whole", ["man", "multilingual"], "all", machine)["files"]
    sizes = {key: (machine.usr_share / key).stat().st_size for keys in whole.values() for key in keys}
    first = whole["man"]
    cap = sum(sizes[key] for key in first[:2])
    assert len(first) > 2 and sum(sizes[key] for key in whole["multilingual"][:1]) <= cap
    total_only = pack(tmp_path / "total", ["man", "multilingual"], "all", machine, cap)["files"]
    assert total_only["man"] == first[:2] and total_only["multilingual"] == []  # the first source took it all
    each = pack(tmp_path / "each", ["man", "multilingual"], "all", machine, each_max_bytes=cap)
    assert each["files"]["man"] == first[:2] and each["files"]["multilingual"]
    assert all(sum(sizes[key] for key in keys) <= cap for keys in each["files"].values())


def test_target_text_continues_training_chunks_in_whole_static_batches(machine, monkeypatch, tmp_path):
    """make_target_text.py: the prompts are the training loader's own chunks (train split, one length),
    answered in whole batches through the static cache, and each record is its chunk followed by the
    target's greedy continuation, the same as the target answers that chunk alone; the records load
    as the chat source with one chunk per record ending at its answer."""
    make_target_text = load_script("benchmarks/make_target_text.py")
    tokenizer = chat_tokenizer()
    target = tiny_llama(vocab_size=len(tokenizer), max_positions=1024)
    recipes = []

    def loader(tokenizer, recipe):
        recipes.append(recipe)
        return LocalTextChunks(tokenizer, recipe.seq_len, recipe.max_tokens, mix="code=0.5,man=0.5", roots=machine)

    monkeypatch.setattr(make_target_text, "_load_target", lambda *args: (target, tokenizer))
    monkeypatch.setattr(make_target_text, "build_dataset", loader)
    out = tmp_path / "tt.jsonl"
    assert make_target_text.main(["--out", str(out), "--max-tokens", "3000", "--prompt-tokens", "48",
                                  "--new-tokens", "5", "--batch-size", "2", "--num-prompts", "5",
                                  "--data-cache", str(tmp_path / "cache")]) == 0
    assert (recipes[0].seq_len, recipes[0].max_tokens, recipes[0].data_cache) == (48, 3000, str(tmp_path / "cache"))
    chunks = loader(tokenizer, recipes[0])
    records = read_chat_jsonl(out, split="train")
    assert len(records) == 4  # 5 asked, rounded down to whole batches of 2
    indices = [int(r["files"][0].removeprefix("chunk:")) for r in records]
    assert len(set(indices)) == 4
    for record, index in zip(records, indices):
        prompt = chunks.chunks[index].tolist()
        assert record["task"] == "continue" and record["prompt_tokens"] == 48
        assert record["origin"] == chunks.source_names[int(chunks.chunk_sources[index])]
        assert record["input_ids"][:48] == prompt and 1 <= record["answer_tokens"] <= 5
        assert record["input_ids"] == generate_chat_answers(target, tokenizer, [prompt], max_new_tokens=5)[0]
    summary = json.loads(Path(str(out) + ".summary.json").read_text())
    assert summary["cache"] == "static" and summary["records"] == 4
    assert summary["answer_tokens"] == sum(r["answer_tokens"] for r in records)
    loaded = LocalTextChunks(tokenizer, 32, 10_000, mix="chat=1", chat_data=[str(out)], chat_windows="end",
                             roots=machine)
    assert len(loaded) == 4
    with pytest.raises(ValueError, match="no whole batch of 8"):
        make_target_text.chunk_prompts(chunks, 5, 8, seed=0)
