"""What the app computes, one module per concern, tested without a server; ``app.py`` only wires it to widgets.

Nothing here imports gradio.
"""
