"""Token-level exact match: is a generated token sequence identical to a reference, and where
does it first differ?

Lossless speculative decoding must reproduce the target's greedy output token for token, so
the benchmark compares every method's new tokens with vanilla greedy generate through this
metric. It is a local `evaluate` module (nothing is fetched):

    metric = evaluate.load("<path to this folder or file>")
    metric.compute(predictions=[[1, 2, 3]], references=[[1, 2, 4]])
    # {'exact_match': 0.0, 'token_accuracy': 0.666..., 'first_divergence': [2], ...}

`token_exact_match(predictions, references)` computes the same without `evaluate` (the GPU
machine may lack it); the guarded import keeps that function importable there.
"""

try:  # indented on purpose: evaluate's import scanner only checks top-level imports
    import datasets
    import evaluate
except ImportError:
    datasets = evaluate = None

_CITATION = ""
_DESCRIPTION = """
Compares token-id sequences pairwise. exact_match: fraction of pairs that are identical.
token_accuracy: mean over pairs of (positions where both agree) / (length of the longer one).
first_divergence: per pair, index of the first differing token, -1 when identical (a shorter
sequence that is a prefix of the other diverges at its own length).
"""
_KWARGS_DESCRIPTION = """
Args:
    predictions: list of token-id sequences (the method under test).
    references: list of token-id sequences (e.g. vanilla greedy output), same count.
Returns:
    exact_match (float), token_accuracy (float), first_divergence (list[int], -1 = identical),
    mean_matched_prefix (float): mean tokens matched before the first divergence.
"""


def first_divergence(prediction, reference) -> int:
    """Index of the first differing token; -1 when the sequences are identical."""
    for index, (a, b) in enumerate(zip(prediction, reference)):
        if int(a) != int(b):
            return index
    return -1 if len(prediction) == len(reference) else min(len(prediction), len(reference))


def token_exact_match(predictions, references) -> dict:
    """The metric itself, as a plain function."""
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions for {len(references)} references")
    divergences, accuracies, prefixes = [], [], []
    for prediction, reference in zip(predictions, references):
        divergence = first_divergence(prediction, reference)
        longest = max(len(prediction), len(reference), 1)
        agreeing = sum(int(a) == int(b) for a, b in zip(prediction, reference))
        divergences.append(divergence)
        accuracies.append(agreeing / longest)
        prefixes.append(len(reference) if divergence < 0 else divergence)
    count = max(len(divergences), 1)
    return {
        "exact_match": sum(d < 0 for d in divergences) / count,
        "token_accuracy": sum(accuracies) / count,
        "first_divergence": divergences,
        "mean_matched_prefix": sum(prefixes) / count,
    }


class TokenExactMatch(evaluate.Metric if evaluate is not None else object):
    """`evaluate` wrapper around `token_exact_match`."""

    def _info(self):
        sequence = datasets.Sequence(datasets.Value("int64"))
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"predictions": sequence, "references": sequence}),
        )

    def _compute(self, predictions, references):
        return token_exact_match(predictions, references)
