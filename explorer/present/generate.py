"""Generate: the note on the encoder-decoder rewriter.
"""



FOLIO_REWRITE = """**folio-to-modern** (the *Folio example* button) rewrites First Folio spelling into modern spelling,
one line at a time, as it was trained: its encoder reads one line, its decoder writes the modern line token by
token. A passage is rewritten line by line; the output keeps your line breaks."""
