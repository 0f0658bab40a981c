"""The route most transformers users take to chat with an instruct model: ``pipeline("text-generation")`` with chat
messages, the LongSpec draft given to the pipeline (``assistant_model=``, at construction or per call). The pipeline
builds the prompt from SmolLM2's chat template and calls ``generate``; its answer must be vanilla's."""

from transformers import pipeline

from hf_longspec.corpus import long_prompt_ids
from hf_longspec.demo import load_draft_for


def test_a_chat_pipeline_with_the_draft_answers_as_the_vanilla_pipeline_does(embedded):
    target, tokenizer = embedded
    draft, _ = load_draft_for(target, "embedded")
    document = tokenizer.decode(long_prompt_ids(tokenizer, 600, kind="prose", split="eval", seed=3))
    messages = [{"role": "user", "content": document + "\n\nSummarize the text above in three sentences."}]
    options = dict(max_new_tokens=32, do_sample=False)

    vanilla = pipeline("text-generation", model=target, tokenizer=tokenizer)(messages, **options)
    with_draft = pipeline("text-generation", model=target, tokenizer=tokenizer, assistant_model=draft)
    answer = with_draft(messages, **options)
    assert draft.last_stats.rounds >= 2 and draft.last_stats.new_tokens == 32  # the draft's rounds made the answer
    assert answer == vanilla
    draft.last_stats = None
    assert pipeline("text-generation", model=target, tokenizer=tokenizer)(messages, assistant_model=draft,
                                                                           **options) == vanilla
    assert draft.last_stats is not None and draft.last_stats.tau > 1
