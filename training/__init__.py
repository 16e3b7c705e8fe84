"""The Shakespeare pipeline: corpus, tokenizer, training presets, training, evaluation, model cards.

    python -m training.corpus       # download, verify, split by play, align Folio/modern lines, tokenizer
    python -m training.train --preset NAME --output-dir checkpoints/NAME
    python -m training.evaluate     # every checkpoint -> checkpoints/results.json
    python -m training.model_card   # checkpoints/*/README.md

Modules: ``corpus`` (download, verify, split by play, align Folio and modern lines), ``tokenization`` (byte-level
BPE), ``presets`` (every model we train, as data), ``data`` (token blocks, Folio/modern pairs), ``build`` (a fresh or
continued model), ``train`` (the command line and the Trainer run), ``snapshots`` (snapshots of a run as it trains),
``distillation`` (learning from teachers), ``summary`` (training_summary.json), ``float16`` (storing weights as
float16 when that costs nothing), ``evaluate`` (test-set figures, extrapolation, CER), ``checkpoints`` (the model code
each checkpoint ships, upgrading an older folder), ``model_card`` (the cards), ``renaming`` (invented names for the
Folio pairs), ``excerpt`` (the text the app's live training reads).

It builds on ``modeling`` (the model) and ``checkpointing`` (loading and scoring a checkpoint, shared with the
app); nothing here is imported by either, nor by the app.
"""
