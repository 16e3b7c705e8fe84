"""What the app and the training pipeline share about a trained checkpoint: where the folders are (``paths``),
checking and loading one (``loading``) and scoring text with it in bits per character (``scoring``).

It builds on ``modeling`` and the Hugging Face libraries only; neither the app nor ``training`` is imported here.
"""
