"""Generating text, for the Generate tab and every view that decodes.

- ``model_ids``: a user's text as token ids the model has embedding rows for (a token added to the tokenizer beyond
  them refused by name);
- ``decoding``: decoding settings checked against each other, prompts kept inside what the model can read, one
  generate() call with per-request seeded sampling, the stop flags;
- ``batching``: decoder-only generations of concurrent requests run as one continuously batched decode;
- ``streaming``: a generation streamed token by token to the app (through ``batching``, or line by line for an
  encoder-decoder), above both;
- ``tokens``: what one forward pass reads (an encoder-decoder's decoder input is its own rewrite), and the one check
  of an answer or target a user types (one token, the leading-space hint);
- ``labels``: how a token is written on screen, the same for a byte-level and a SentencePiece tokenizer (its leading
  space kept, a split character's bytes as ⟨c3⟩, what draws nothing marked: ␣ ↵ ⇥ ‹CR›), and a label typed back
  read as its token;
- ``symbols``: one printable symbol per token id, the tokenizer of a model trained on random tokens, and texts it reads.
"""
