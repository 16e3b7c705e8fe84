"""The Shakespeare the app's live training reads: two plays of the train split, shipped with the app (the corpus
is not), made from the same verified source archive as the corpus:

    python -m training.excerpt explorer/learning/shakespeare_excerpt.txt

Only train-split plays, so nothing of the validation or test plays reaches a model trained on it.
"""

import argparse
from pathlib import Path

from .corpus import fetch_source, read_texts, split_of

EXCERPT_PLAYS = ("romeo_and_juliet", "midsummer_nights_dream")  # about 240 KB together


def excerpt(plays: tuple[str, ...] = EXCERPT_PLAYS) -> str:
    """The plays' cleaned modern-spelling texts, joined as the corpus joins them (a blank line between)."""
    modern, _ = read_texts(fetch_source())
    if any(split_of(play) != "train" for play in plays):
        raise ValueError(f"the excerpt takes train-split plays only; {plays} includes others")
    return "\n".join(modern[play] for play in plays)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output", type=Path)
    path = parser.parse_args().output
    path.write_text(excerpt())
    print(f"wrote {path} ({path.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
