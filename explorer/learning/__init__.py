"""explorer.learning: models learning, seen. Three tabs compute here (no gradio): One gradient step, Train one
yourself (live training) and Watch it learn (training runs, recorded and from the Hub, one typed timeline).

- ``gradient_step``: one plain gradient step on a copy of a shared model: where learning pushes, what one step changes.
- ``factored_gradient``: the step's weight matrices' gradients kept as the vectors they are made of (``LowRankGradient``:
  each figure from Gram matrices, the stepped layer's output without the stepped matrix), collected on the copy.
- ``live_settings``: what one live training job may be asked for: ``LiveSettings``, the default, the presets, checks.
- ``live_data``: what a live job reads: Shakespeare (with or without repeated passages), repeating random tokens, or
  the learner's text, drawn afresh on every read.
- ``live_model``: the fresh, seeded model a live job builds from its settings.
- ``live_snapshots``: what a live job shows every few steps (``Snapshot``): the loss so far, a greedy sample, one
  head's attention on the probe, and every head's ``least_induction_score_over_offsets``.
- ``live_result``: what a finished job hands back (``LiveResult``, its JSON) and ``save_zip``.
- ``train_live``: the live job itself: the AdamW loop in a thread, streaming snapshots, then the result.
- ``timeline``: ``Timeline``, every head's scores over a model's training, the one type a training run and a Hub
  repo's revisions both are; ``step_label``, ``heads_formed``, ``formed_line``.
- ``training_runs``: the training runs on disk (a checkpoint with a timeline.json): found, read (``TrainingRun``, a
  Timeline) and their snapshots' weights loaded.
- ``composition``: K-composition over training: what a later head's induction score loses without an earlier head.
- ``guesses``: the next tokens a model guesses right as it reads a text, as one aligned line, and the repeat counted.
- ``watch_it_learn``: Watch it learn's view of a training run at one snapshot on a text (``TimelineView``).
- ``hub_revisions``: a Hub repo's training revisions (Pythia's ``step…``) opened and measured as a ``HubTimeline``
  (a Timeline; ``to_json()`` is the ``hub_timeline`` API's JSON).

The induction score every module uses is ``checkpointing.in_context.induction_scores``, the standard one.
"""
