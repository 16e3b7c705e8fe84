"""What one live training job may be asked for (Train one yourself): ``LiveSettings``, the default job and the
one-click presets, and ``check_settings``, which turns a client's values into settings or an InputProblem naming the
choice and what is allowed. The bounds keep one job small on a shared CPU.
"""

from dataclasses import dataclass, replace

from modeling import POSITION_ENCODINGS

from explorer.core.inputs import InputProblem, echo, number, whole_number

DATA_KINDS = {
    "shakespeare": "Shakespeare",
    "shakespeare-repeats": "Shakespeare with repeated passages",
    "random-repeats": "Repeating random tokens",
    "own-text": "Your own text",
}
TEXT_KINDS = ("shakespeare", "shakespeare-repeats", "own-text")
# (least, most) of every whole-number choice: the bounds that keep one job small on a shared CPU
LIMITS = {
    "n_layers": (1, 2),
    "n_heads": (1, 8),
    "d_model": (16, 256),
    "steps": (1, 3000),
    "batch_size": (1, 64),
    "context_length": (16, 128),
    "vocab_size": (8, 512),  # random tokens only
    "log_every": (1, 500),
    "sample_tokens": (0, 64),
    "seed": (0, 2**31 - 1),
}
# how a message names a choice: the label the tab shows beside it
LABELS = {"n_layers": "Layers", "n_heads": "Heads", "d_model": "d_model", "vocab_size": "Vocabulary size",
          "attention_only": "Attention only", "copies_only": "Loss on the copies only"}
MAX_LEARNING_RATE = 0.1
MAX_TEXT_CHARS = 100_000  # the learner's own text


@dataclass(frozen=True)
class LiveSettings:
    """One job. ``copy_share``: the share of tokens that copy an earlier run (random-repeats, and the Shakespeare
    sequences with repeats; see ``repeat_runs``); ``repeat_share``: the share of Shakespeare sequences with repeats;
    ``attention_only``: no feed-forward sublayer (``build_model``); ``copies_only``: the loss counts only the
    copyable tokens (``live_data.copyable``)."""

    data: str = "shakespeare"
    n_layers: int = 2
    n_heads: int = 4
    d_model: int = 64
    steps: int = 300
    learning_rate: float = 3e-3
    position_encoding: str = "rope"
    batch_size: int = 16
    context_length: int = 64
    vocab_size: int = 64
    copy_share: float = 0.5
    repeat_share: float = 0.5
    log_every: int = 25
    sample_tokens: int = 24
    seed: int = 0
    text: str = ""
    attention_only: bool = False
    copies_only: bool = False


# The default job: 300 steps on Shakespeare (python -m benchmarks.live_training --threads 1 --set data=shakespeare).
DEFAULT = LiveSettings()

# One-click settings: (label, the choices they set). "induction": measured through the tab's own loop, one thread
# (docs/watch-it-learn.md "Live"): the copy loss sits near ln 256 for the first ~800 steps, then falls as a layer-1
# head passes 0.3 at about step 1000 (seed 0: 1000, seed 1: 1200, with attention-only layers of the model's own).
PRESETS = {
    "induction": ("Induction head: random tokens, attention only, loss on the copies",
                  dict(data="random-repeats", n_layers=2, n_heads=4, d_model=64, vocab_size=259, context_length=64,
                       batch_size=16, learning_rate=3e-3, position_encoding="learned", copy_share=0.5, steps=2000,
                       log_every=100, attention_only=True, copies_only=True)),
}


def check_settings(**values) -> LiveSettings:
    """A LiveSettings from a client's values (missing ones take the preset's, if one is named, else the default);
    anything out of bounds is an InputProblem naming the choice and what is allowed."""
    preset = values.pop("preset", None) or None
    unknown = sorted(set(values) - set(LiveSettings.__dataclass_fields__))
    if unknown:
        raise InputProblem(f"Unknown choice(s): {', '.join(echo(u) for u in unknown)}.")
    if preset is not None and preset not in PRESETS:
        raise InputProblem(f"The preset must be one of {', '.join(PRESETS)} (or none); got {echo(preset)}.")
    values = (PRESETS[preset][1] if preset else {}) | {k: v for k, v in values.items() if v is not None}
    settings = replace(DEFAULT, **values)
    if settings.data not in DATA_KINDS:
        raise InputProblem(f"The data must be one of {', '.join(DATA_KINDS)}; got {echo(settings.data)}.")
    if settings.position_encoding not in POSITION_ENCODINGS:
        raise InputProblem(f"The position encoding must be one of {', '.join(POSITION_ENCODINGS)}; "
                           f"got {echo(settings.position_encoding)}.")
    checked = {name: whole_number(getattr(settings, name), LABELS.get(name, name.replace("_", " ").capitalize()), *bounds)
               for name, bounds in LIMITS.items()}
    for name in ("attention_only", "copies_only"):
        if not isinstance(getattr(settings, name), bool):
            raise InputProblem(f"{LABELS[name]} must be true or false; got {echo(getattr(settings, name))}.")
    if checked["d_model"] % checked["n_heads"]:
        raise InputProblem(f"d_model ({checked['d_model']}) must be divisible by the number of heads "
                           f"({checked['n_heads']}): each head reads d_model / heads dimensions.")
    if (checked["d_model"] // checked["n_heads"]) % 2 and settings.position_encoding == "rope":
        raise InputProblem("RoPE rotates pairs of dimensions: d_model / heads must be even.")
    rate = number(settings.learning_rate, "The learning rate", f"greater than 0, at most {MAX_LEARNING_RATE:g}")
    if not 0 < rate <= MAX_LEARNING_RATE:
        raise InputProblem(f"The learning rate must be greater than 0 and at most {MAX_LEARNING_RATE:g}; "
                           f"got {echo(settings.learning_rate)}.")
    shares = {}
    for name, low in (("copy_share", 0.02), ("repeat_share", 0.0)):
        value = number(getattr(settings, name), name.replace("_", " ").capitalize(), f"from {low:g} to 0.5")
        if not low <= value <= 0.5:
            raise InputProblem(f"{name.replace('_', ' ').capitalize()} must be from {low:g} to 0.5; got {echo(value)}.")
        shares[name] = value
    text = settings.text if settings.data == "own-text" else ""
    if settings.data == "own-text":
        if not isinstance(text, str) or not text.strip():
            raise InputProblem("Paste your own text first: the box is empty.")
        if len(text) > MAX_TEXT_CHARS:
            raise InputProblem(f"Your text is {len(text):,} characters; live training reads at most "
                               f"{MAX_TEXT_CHARS:,}. Shorten it.")
    return replace(settings, **checked, **shares, learning_rate=rate, text=text)
