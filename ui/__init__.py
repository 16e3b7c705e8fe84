"""The app's page in gradio; ``app.py`` assembles it. Everything shown is computed in the ``explorer`` package (tested
there, without gradio).

- ``tabs``: one module per tab, its layout and its handlers side by side (the package's docstring lists the thirteen).
  Each has ``tab(choices, value, decoding)``, which builds the tab inside the page's ``gr.Tabs``, wires its events
  there, and returns its ``TabParts``. No tab imports another: what two parts of the page share lives here.
- ``tab``: ``TabParts``, what a tab gives ``app.py``: its model menus (which list the decoder-only models apart), the
  decoding controls (Generate's), the trained model's actions (Train one yourself's).
- ``events``: the event plumbing: ``guarded`` (a failure ends as a message in the status line, the other outputs,
  named, cleared), ``status``, the concurrency groups, ``UNCHECKED``, ``NO_FIGURE``/``NO_TEXT``/``KEPT``.
- ``menus``: the model menus: what they list (``menus_now``, ``decoder_only``), a menu with its model's line
  (``model_menu``, ``text_and_model``), every menu of the page refreshed together (``PageMenus``, ``catalog_event``,
  ``after_open``), the attention-kind menus.
- ``controls``: the decoding controls (``DecodingControls``, ``view_inputs``), the Decoding radio's toggle
  (``sampling_controls``), the clickable HTML strips and grids (``clickable``, ``clicked``).
- ``style``: the page's CSS.
- ``open_model``: the "Open a model" panel above the tabs: a Hub repo or an uploaded zip, into every tab's menu.
- ``trained_model``: the model trained on Train one yourself, offered to the page: Open in every tab, Push to the Hub,
  and the sign-in's round trip that brings the tab and the model back.
"""
