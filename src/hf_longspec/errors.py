"""Errors that name what was wrong and what is allowed."""


class LongSpecError(ValueError):
    """Base class: every hf-longspec usage error is a ValueError a caller can catch."""


class IncompatibleDraftError(LongSpecError):
    """A draft and a target disagree on something the draft borrows from the target."""


class UnsupportedTargetError(LongSpecError):
    """The target architecture (or its cache) is one the draft cannot read."""


class UnboundDraftError(LongSpecError):
    """The draft was used before `draft.bind(target)` gave it embeddings, LM head and KV cache."""


class UnsupportedGenerationError(LongSpecError):
    """A generate() option that LongSpec speculation does not support."""


class DraftNotRoutedError(IncompatibleDraftError, AttributeError):
    """A LongSpec draft reached transformers' stock assisted generation of a model it is not bound to.

    Also an AttributeError, so hasattr()/getattr(default) on the draft keep working."""


class NotADraftError(LongSpecError):
    """A folder or config that is not a LongSpec draft was given where a draft is expected."""


class TrainingRecipeError(LongSpecError):
    """A training setting (or the output folder) that cannot give a sensible run."""


class CommandLineError(LongSpecError):
    """A command-line argument that is wrong; found before anything runs (at most the target is loaded, to read a
    limit of its own)."""
