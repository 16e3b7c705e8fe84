"""What the app and the training pipeline share about a trained checkpoint: where the folders are (``paths``),
checking and loading one (``loading``), scoring text with it in bits per character (``scoring``), measuring how it
copies from its context (``in_context``) and reading the recorded run some checkpoints ship beside them (``timeline``).

It builds on ``modeling`` and the Hugging Face libraries only; neither the app nor ``training`` is imported here.
"""
