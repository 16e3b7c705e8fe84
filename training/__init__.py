"""The Shakespeare pipeline: corpus, tokenizer, training presets, training, evaluation, model cards.

    python -m training.corpus       # download, verify, split by play, align Folio/modern lines, tokenizer
    python -m training.train --preset NAME --output-dir checkpoints/NAME
    python -m training.evaluate     # every checkpoint -> checkpoints/results.json
    python -m training.model_card   # checkpoints/*/README.md

It builds on ``modeling`` (the model) and ``checkpointing`` (loading and scoring a checkpoint, shared with the
app); nothing here is imported by either, nor by the app.
"""
