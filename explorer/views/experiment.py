"""The position-encoding experiment as ``results.json`` records it: every seed of every encoding, what is larger
than seed noise, and our perplexity ratios beside the published ones.

Every number here is read from ``results.json`` (written by ``python -m training.evaluate``) or, for the
published papers, computed from the perplexities it stores: a ratio is perplexity at kL / perplexity at L.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Separation:
    """Two encodings next to each other in the ranking by mean bits/char, and how the gap between them compares
    with the seed noise, taken as the larger of their two spreads (max - min over the seeds). Two seeds measure
    noise roughly, so a gap counts as settled only at twice the noise."""

    better: str
    worse: str
    gap: float
    noise: float

    @property
    def verdict(self) -> str:
        if self.gap <= self.noise:
            return "not larger than seed noise: these seeds cannot rank them"
        if self.gap < 2 * self.noise:
            return "larger than seed noise, but less than twice it: suggestive, not settled"
        return "more than twice the seed noise: a real difference"


def ranked(experiment: dict) -> list[str]:
    """The encodings, best (lowest mean bits/char) first."""
    encodings = experiment.get("encodings") or {}
    return sorted((e for e in encodings if encodings[e].get("bits_per_char")), key=lambda e: encodings[e]["bits_per_char"]["mean"])


def separations(experiment: dict) -> list[Separation]:
    encodings, order = experiment.get("encodings") or {}, ranked(experiment)
    stats = {e: encodings[e]["bits_per_char"] for e in order}
    return [Separation(a, b, stats[b]["mean"] - stats[a]["mean"], max(stats[a]["spread"], stats[b]["spread"]))
            for a, b in zip(order, order[1:])]


def context_and_longer(entry: dict) -> tuple[int, list[str]]:
    """One encoding's training context, and the evaluated lengths past it (as results.json keys them)."""
    context = next(iter(entry["runs"].values()))["training_context"]
    return context, [n for n in entry["perplexity_ratio"] if int(n) > context]


def _range(stats: dict | None, digits: int) -> str:
    """mean (min–max over the seeds): with two seeds the range is the two runs themselves."""
    if not stats:
        return "n/a"
    low, high = stats["mean"] - stats["spread"] / 2, stats["mean"] + stats["spread"] / 2
    if stats.get("n") == 2:  # two seeds: mean ± spread/2 are exactly the two values
        return f"{stats['mean']:.{digits}f} ({low:.{digits}f}–{high:.{digits}f})"
    return f"{stats['mean']:.{digits}f} (spread {stats['spread']:.{digits}f})"


def seeds_table(experiment: dict) -> str:
    """Markdown: per encoding, bits/char of each seed, mean and spread, and the perplexity ratio at each
    length past the training context (mean and the two seeds' range)."""
    encodings, order = experiment.get("encodings") or {}, ranked(experiment)
    if not order:
        return "No experiment results yet: run `python -m training.evaluate`."
    seeds = [str(s) for s in experiment.get("seeds", [])]
    context, longer = context_and_longer(encodings[order[0]])
    header = (["encoding", "bits/char (mean)", "spread"] + [f"seed {s}" for s in seeds]
              + [f"ratio ×{int(n) // context} ({n} tokens)" for n in longer])
    rows = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for encoding in order:
        entry = encodings[encoding]
        stats, runs = entry["bits_per_char"], entry["runs"]
        cells = [f"**{encoding}**", f"{stats['mean']:.4f}", f"{stats['spread']:.4f}"]
        cells += [f"{runs[s]['bits_per_char']:.4f}" if s in runs else "–" for s in seeds]
        cells += [_range(entry["perplexity_ratio"].get(n), 3) for n in longer]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def separation_lines(experiment: dict) -> str:
    """Markdown bullets: each neighbouring pair in the ranking, with its gap against the seed noise."""
    lines = []
    for s in separations(experiment):
        lines.append(f"- {s.better} before {s.worse}: {s.gap:.4f} bits/char apart, against a seed spread of up to "
                     f"{s.noise:.4f}; {s.verdict}.")
    return "\n".join(lines)


def published_ratios(source: dict) -> dict[str, dict[int, float]]:
    """encoding -> {length: perplexity(length) / perplexity(training length)} from a paper's perplexities."""
    base = source["training_length"]
    return {encoding: {int(n): ppl / values[base] for n, ppl in values.items() if int(n) != base}
            for encoding, values in ((e, {int(k): v for k, v in p.items()}) for e, p in source["perplexity"].items())}


def published_table(experiment: dict, published: dict, our_setup: str) -> str:
    """Markdown: per encoding, our ratio at each multiple of the training context next to each paper's ratios,
    every column headed with its setup and lengths."""
    encodings = experiment.get("encodings") or {}
    if not encodings or not published:
        return ""
    order = ranked(experiment)
    context, longer = context_and_longer(encodings[order[0]])
    header, columns = ["encoding"], []
    for n in longer:
        header.append(f"ours ×{int(n) // context}")
        columns.append(lambda e, n=n: _mean(encodings.get(e, {}).get("perplexity_ratio", {}).get(n)))
    for key, source in published.items():
        ratios = published_ratios(source)
        base = source["training_length"]
        for n in sorted({n for r in ratios.values() for n in r}):
            header.append(f"{_short(key)} ×{n / base:.2f}")
            columns.append(lambda e, r=ratios, n=n: r.get(e, {}).get(n))
    rows = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for encoding in order:
        cells = [f"**{encoding}**"] + [("–" if v is None else f"{v:.2f}") for v in (c(encoding) for c in columns)]
        rows.append("| " + " | ".join(cells) + " |")
    setups = [f"- ours: {our_setup}, trained at L = {context} tokens"]
    setups += [f"- {_short(key)}: {source['source']}; {source['setup']}" + (f"; {source['note']}" if source.get("note") else "")
               for key, source in published.items()]
    return "\n".join(rows) + "\n\n" + "\n".join(setups)


def _mean(stats: dict | None) -> float | None:
    return None if not stats else stats["mean"]


def _short(key: str) -> str:
    """'press2022_alibi' -> 'Press 2022'."""
    name = key.split("_")[0]
    year = next((i for i, c in enumerate(name) if c.isdigit()), len(name))
    return f"{name[:year].capitalize()} {name[year:]}".strip()


def our_setup(config) -> str:
    """One line on how our experiment models are built, from a checkpoint's config."""
    if config is None:
        return "Shakespeare (our test plays)"
    return (f"Shakespeare test plays, {config.n_layers} layers, d_model {config.d_model}, {config.n_heads} heads, "
            f"BPE vocabulary of {config.vocab_size}")


def experiment_markdown(experiment: dict, published: dict, config=None) -> str:
    """The experiment's tables as the app shows them: every seed with mean and spread, what is larger than seed
    noise, and our ratios beside the papers'."""
    if not (experiment or {}).get("encodings"):
        return "No experiment results yet: run `python -m training.evaluate`."
    n_seeds = len(experiment.get("seeds", []))
    parts = [f"#### Every seed ({n_seeds} per encoding; the app's models are seed {experiment['seeds'][0]})",
             "Bits per character on the held-out test plays at the training context; *ratio ×k*: perplexity on the same "
             "text read in windows k times the training context, divided by perplexity at the training context (below "
             "1: longer windows help; far above 1: the model breaks past its training length). In brackets: the two "
             "seeds.", "", seeds_table(experiment), "",
             "#### Which differences are real", separation_lines(experiment)]
    comparison = published_table(experiment, published, our_setup(config))
    if comparison:
        parts += ["", "#### Our ratios beside the published ones",
                  "Perplexity at k times the training length divided by perplexity at the training length. The "
                  "papers' models are about 100 to 500 times larger and read other text: compare the direction and the "
                  "order of the encodings, not the values.", "", comparison]
    return "\n".join(parts)


POSITION_BIN = 16  # positions per point of the smoothed per-position curve


def binned_curve(curve: list[float], width: int = POSITION_BIN) -> list[tuple[int, int, float]]:
    """The per-position curve (positions 1..len) averaged over bins of ``width`` positions: (first, last, mean).
    One position's mean loss covers one token per window, so it is noisy; a bin covers ``width`` times more."""
    return [(start + 1, min(start + width, len(curve)), sum(curve[start:start + width]) / len(curve[start:start + width]))
            for start in range(0, len(curve), width)]
