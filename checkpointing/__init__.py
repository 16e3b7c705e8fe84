"""What the app and the training pipeline share about a trained checkpoint.

- ``paths``: where things live (the repository's folders, the checkpoints);
- ``loading``: checking a checkpoint folder (what is wrong with it, named) and loading it;
- ``scoring``: bits per character of a text under a causal language model;
- ``in_context``: copying from the context: the data that teaches it, the induction and previous-token scores, the
  repeated-passage ratio;
- ``training_run``: a recorded training run on disk: its timeline.json and snapshots beside the final model.

It builds on ``modeling`` and the Hugging Face libraries only; neither the app nor ``training`` is imported here.
"""
