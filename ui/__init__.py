"""The app's tabs, one module each, its layout and its handlers side by side: ``generate``, ``encodings`` (Compare
encodings), ``attention`` (Attention heads), ``forward`` (Inside the forward pass), ``steps`` (Attention, step by
step), ``lens`` (Logit lens), ``ablation`` (Head ablation), ``sampling`` (Sampling, seen), ``gradient_step`` (One
gradient step) and ``train_live`` (Train one yourself). Each has a ``tab`` function that builds the tab inside the
page's ``gr.Tabs`` and wires its events there. ``common`` holds what
they share: the model menu, the decoding controls, the status line, the event plumbing and the CSS.

Everything shown is computed in the ``explorer`` package (tested there, without gradio).
"""
