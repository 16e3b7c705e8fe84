"""Every model we train, as plain data: the model's config fields and the training settings.

    python -m training.train --preset NAME --output-dir checkpoints/NAME

A preset is a ``Preset``: ``model`` holds ``ScratchTransformerConfig`` fields, ``train`` a ``TrainSettings``; a preset
with ``starts_from`` continues from another preset's trained model. The five encoding models share every value except
``position_encoding``, and each is trained with every seed of ``ENCODING_SEEDS`` (the first seed's model is the one
we ship). What each preset scored, and what else was tried: docs/main-model.md, docs/folio-to-modern.md and
docs/position-encodings.md.
"""

from dataclasses import dataclass, field, replace

from modeling import POSITION_ENCODINGS

ENCODING_SEEDS = (1234, 5678)
DEFAULT_SEED = ENCODING_SEEDS[0]


@dataclass(frozen=True)
class TrainSettings:
    context_length: int  # tokens per training sequence (seq2seq: the most tokens per side)
    batch_size: int  # sequences per optimizer step, split over the processes under torchrun
    max_steps: int
    learning_rate: float  # peak; linear warm-up, then ``schedule`` (AdamW)
    warmup_steps: int
    weight_decay: float = 0.1
    schedule: str = "cosine"  # after the warm-up: "cosine" decay to 0, or "constant"
    precision: str = "fp32"  # "bf16": mixed precision (autocast) on CUDA, and on CPUs with bf16 support
    eval_steps: int = 100  # validation every eval_steps (the curve in training_summary.json)
    eval_examples: int = 256  # validation sequences (or pairs) per evaluation
    keep_best: bool = False  # ship the checkpoint with the lowest validation loss, not the last one
    weights_dtype: str | None = None  # "float16": stored so when bits/char moves by less than FLOAT16_TOLERANCE
    tokenizer: str = "bpe"  # training.tokenization.TOKENIZER_KINDS: "bpe" (4096 tokens) or "bytes"
    group_by_length: bool = False  # batch pairs of similar length together (less padding)
    shifted_blocks: bool = False  # language models: cut the training text at a random shift on every read
    renamed_share: float = 0.0  # seq2seq: share of pairs read with their names invented anew (training.renaming)
    label_smoothing: float = 0.0  # ε: targets are (1-ε)·one-hot + ε/V (Szegedy et al. 2016); training loss only
    distill_weight: float = 0.0  # w: the share of the training loss that is KL to the teachers (training.distillation.distillation_loss)
    # Copying from the context (training.data.WithRepeats): the share of sequences replaced by random tokens whose
    # runs repeat, the share of the other (text) sequences whose runs repeat, and the share of a repeating
    # sequence's tokens that are copies (checkpointing.in_context.repeat_runs).
    random_repeat_share: float = 0.0
    passage_repeat_share: float = 0.0
    copy_share: float = 0.5
    timeline_every: int = 0  # record a snapshot every N steps (training.snapshots); 0: none
    timeline_snapshots: int = 0  # how many of them ship beside the model, denser where the figures change


@dataclass(frozen=True)
class Preset:
    model: dict = field(default_factory=dict)
    train: TrainSettings | None = None
    # A preset that continues training a model another preset made (``--init-from`` its output): ``model`` then holds
    # only the config fields it changes (say, dropout); the architecture is the trained model's.
    starts_from: str | None = None


# The encoding experiment: small decoder-only models, identical but for position_encoding.
ENCODING_MODEL = dict(d_model=192, n_heads=6, n_layers=4, d_ff=768, dropout=0.1, norm_first=True, activation="gelu")
ENCODING_TRAIN = TrainSettings(context_length=128, batch_size=32, max_steps=1770, learning_rate=2e-3,
                               warmup_steps=100, precision="bf16", weights_dtype="float16")

# The two timeline models: byte-level (258 tokens) and small, so that their float16 snapshots fit in a few megabytes.
TIMELINE_MODEL = dict(d_model=64, n_heads=4, n_layers=2, d_ff=128, dropout=0.0, norm_first=True, activation="gelu",
                      position_encoding="rope")
TIMELINE_TRAIN = TrainSettings(context_length=128, batch_size=32, max_steps=8000, learning_rate=2e-3, warmup_steps=100,
                               weight_decay=0.0, schedule="constant", eval_steps=500, eval_examples=64,
                               tokenizer="bytes", weights_dtype="float16", timeline_every=50, timeline_snapshots=21)

PRESETS: dict[str, Preset] = {
    **{f"shakespeare-{encoding}": Preset(dict(ENCODING_MODEL, position_encoding=encoding), ENCODING_TRAIN)
       for encoding in POSITION_ENCODINGS},
    # The main model's first recipe (1.965 bits/char); every try and its score: docs/main-model.md.
    "shakespeare-main": Preset(
        dict(d_model=256, n_heads=8, n_layers=6, d_ff=1024, dropout=0.1, norm_first=True, activation="gelu",
             position_encoding="rope"),
        TrainSettings(context_length=256, batch_size=16, max_steps=2400, learning_rate=1.5e-3, warmup_steps=100,
                      eval_steps=100, eval_examples=256, keep_best=True, weights_dtype="float16"),
    ),
    # First Folio spelling -> modern spelling (encoder-decoder); every try and its score: docs/folio-to-modern.md.
    "folio-to-modern": Preset(
        dict(d_model=256, n_heads=8, n_layers=3, n_encoder_layers=3, d_ff=1024, dropout=0.1,
             position_encoding="sinusoidal", is_encoder_decoder=True),
        TrainSettings(context_length=64, batch_size=64, max_steps=20000, learning_rate=2e-3, warmup_steps=400,
                      precision="bf16", eval_steps=1000, tokenizer="bpe", group_by_length=True, weights_dtype="float16"),
    ),
    # The shipped folio-to-modern: one seed's model taught by four seeds' models; see docs/folio-to-modern.md.
    "folio-to-modern-distilled": Preset(
        dict(),
        TrainSettings(context_length=64, batch_size=64, max_steps=4000, learning_rate=5e-4, warmup_steps=100,
                      precision="bf16", eval_steps=1000, tokenizer="bpe", group_by_length=True, weights_dtype="float16",
                      renamed_share=0.5, distill_weight=0.9),
        starts_from="folio-to-modern",
    ),
    # The shipped shakespeare-main: the dropout-0.4 run taught by three main-model runs; see docs/main-model.md.
    "shakespeare-main-distilled": Preset(
        dict(dropout=0.2, activation_dropout=0.4),
        TrainSettings(context_length=256, batch_size=16, max_steps=1500, learning_rate=5e-4, warmup_steps=100,
                      precision="bf16", eval_steps=250, eval_examples=256, keep_best=True, weights_dtype="float16",
                      shifted_blocks=True, distill_weight=0.9),
        starts_from="shakespeare-main",
    ),
    # The main model's shape trained from scratch to copy from its context: 10% of sequences random tokens with repeated
    # runs, 28% of the others (25% of all) text with repeated runs. On an H100 this mix (constant learning rate, no
    # schedule) formed an induction head between steps 3000 and 4000 and then overfitted; here the rate decays and the
    # best validation checkpoint is kept. Not yet run to the end: it needs a GPU (docs/watch-it-learn.md).
    "shakespeare-main-copying": Preset(
        dict(d_model=256, n_heads=8, n_layers=6, d_ff=1024, dropout=0.1, norm_first=True, activation="gelu",
             position_encoding="rope"),
        TrainSettings(context_length=256, batch_size=32, max_steps=8000, learning_rate=1e-3, warmup_steps=200,
                      precision="bf16", eval_steps=250, eval_examples=256, keep_best=True, weights_dtype="float16",
                      shifted_blocks=True, random_repeat_share=0.1, passage_repeat_share=0.28, timeline_every=250,
                      timeline_snapshots=24),
    ),
    # Phase two of the copying main model: shakespeare-main-copying taught by the shipped shakespeare-main (pass its
    # folder as --teachers), with the distilled recipe's dropout and the same share of sequences teaching copying; the
    # teacher never learned to copy, so those sequences are not distilled (training.distillation.distillation_loss).
    "shakespeare-main-copying-distilled": Preset(
        dict(dropout=0.2, activation_dropout=0.4),
        TrainSettings(context_length=256, batch_size=16, max_steps=1500, learning_rate=5e-4, warmup_steps=100,
                      precision="bf16", eval_steps=250, eval_examples=256, keep_best=True, weights_dtype="float16",
                      shifted_blocks=True, distill_weight=0.9, random_repeat_share=0.1, passage_repeat_share=0.28),
        starts_from="shakespeare-main-copying",
    ),
    # The shipped shakespeare-main: the distilled model (commit e5a4c66's checkpoints/shakespeare-main, --init-from)
    # taught to copy from its context. Half its sequences are random tokens with repeated runs and half of the rest text
    # with repeated runs; on the plain text it learns from itself as it was (the same folder as --teachers), so it keeps
    # what it knew. Without dropout: with the distilled recipe's (0.2, 0.4) the same mix formed no head in 4000 steps.
    # Its timeline records the induction score every 100 steps (no snapshots ship: 11.6 MB each). docs/main-model.md.
    "shakespeare-main-copying-finetuned": Preset(
        dict(dropout=0.0, activation_dropout=0.0),
        TrainSettings(context_length=256, batch_size=8, max_steps=5000, learning_rate=1e-3, warmup_steps=100,
                      precision="bf16", eval_steps=250, eval_examples=256, weights_dtype="float16",
                      shifted_blocks=True, distill_weight=0.9, random_repeat_share=0.5, passage_repeat_share=0.5,
                      timeline_every=100),
        starts_from="shakespeare-main-distilled",
    ),
    # Watching a model learn to copy: two small byte-level models, identical but for the data. The first reads the plays,
    # 80% of its sequences replaced by random tokens and half of the rest with runs repeated too (half the tokens of a
    # repeating sequence are copies); the control reads the plays alone, as every model above does. Each ships its run's
    # snapshots beside it (training.snapshots); what they showed: docs/watch-it-learn.md.
    "timeline-repeats": Preset(TIMELINE_MODEL, replace(TIMELINE_TRAIN, random_repeat_share=0.8, passage_repeat_share=0.5)),
    "timeline-plain": Preset(TIMELINE_MODEL, replace(TIMELINE_TRAIN, timeline_snapshots=6)),
    # For tests: a few seconds.
    "tiny": Preset(
        dict(d_model=32, n_heads=2, n_layers=2, d_ff=64, dropout=0.0, position_encoding="rope"),
        TrainSettings(context_length=32, batch_size=8, max_steps=30, learning_rate=3e-3, warmup_steps=0,
                      eval_steps=50, eval_examples=64),
    ),
    # For tests: a tiny run that records a timeline (a snapshot every 10 steps) and learns to copy from its data.
    "tiny-timeline": Preset(
        dict(d_model=32, n_heads=2, n_layers=2, d_ff=64, dropout=0.0, position_encoding="rope"),
        TrainSettings(context_length=32, batch_size=8, max_steps=30, learning_rate=3e-3, warmup_steps=0,
                      eval_steps=50, eval_examples=16, tokenizer="bytes", random_repeat_share=0.5,
                      passage_repeat_share=0.5, timeline_every=10, timeline_snapshots=3),
    ),
    # For tests: continues a tiny model (--init-from) with more dropout and label smoothing.
    "tiny-continued": Preset(
        dict(dropout=0.2),
        TrainSettings(context_length=32, batch_size=8, max_steps=10, learning_rate=3e-4, warmup_steps=0,
                      eval_steps=50, eval_examples=64, label_smoothing=0.1),
        starts_from="tiny",
    ),
    # For tests: continues a tiny model, learning from teachers only (distill_weight 1).
    "tiny-distilled": Preset(
        dict(),
        TrainSettings(context_length=32, batch_size=8, max_steps=10, learning_rate=3e-3, warmup_steps=0,
                      eval_steps=50, eval_examples=64, distill_weight=1.0),
        starts_from="tiny",
    ),
}
