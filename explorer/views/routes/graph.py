"""The routes as a graph: traced back from the prediction's node, row by row, keeping each update's parts whose share
is over the threshold (``split``), and what a clicked node holds (the logit lens there, the parts feeding it).

Nodes: the decoder's residual stream at (row, position) (row 0 the embeddings, row r the stream after update r),
each block's output at (row, position) (an attention sublayer's, a feed-forward's) where an edge passes through it,
and, for an encoder-decoder, the encoder's output at a source position. Edges: ``kind`` "attention", "feed_forward"
or "residual", ``layer``, ``head`` (attention only), ``source`` and ``target`` token positions, ``weight`` (the
share, 0 to 1), and ``source_stack`` ("encoder" for cross-attention's sources).
"""

from dataclasses import asdict, dataclass, field

import torch

from explorer.core.inputs import InputProblem, echo, number, pick, whole_number
from explorer.generation.decoding import DecodingSettings
from explorer.generation.labels import token_labels
from explorer.views.forward_pass import RecordedPass, recorded_pass
from explorer.views.architecture import Architecture, describe
from explorer.views.lens import TOP_K, read_out
from explorer.views.routes.split import Part, Splitter, Step, steps_of

DEFAULT_THRESHOLD = 0.04  # the share an edge needs to be kept (the paper's τ)
FEEDING_SHOWN = 8  # a clicked node lists this many of the parts feeding it


@dataclass(frozen=True)
class Node:
    """``kind``: "residual" (the stream), "attention" / "cross_attention" / "feed_forward" (a block's output);
    ``stack``: "decoder", or "encoder" (its output, which cross-attention reads); ``row``: the graph's row (-1 for
    the encoder's output); ``layer``: None for the embeddings and the encoder's output."""

    id: str
    kind: str
    stack: str
    row: int
    layer: int | None
    position: int
    stage: str
    token: str


@dataclass(frozen=True)
class Edge:
    kind: str
    layer: int
    head: int | None
    source: int
    target: int
    weight: float
    source_stack: str
    source_node: str
    target_node: str
    through: str | None  # the block node the edge passes through (attention, feed-forward); None for the residual


def residual_id(row: int, position: int) -> str:
    return f"r{row}:{position}"


def encoder_id(position: int) -> str:
    return f"enc:{position}"


def block_id(row: int, position: int, sublayer: str) -> str:
    return f"b{row}:{position}:{sublayer}"


def head_name(layer: int, head: int) -> str:
    return f"L{layer}.H{head}"


@dataclass
class Routes:
    """The graph of the prediction at ``position`` (the token there predicts the next one): ``rows`` names each row
    (the stream after that update), ``feeding`` lists, per residual node reached, its parts' shares summed by head or
    block, largest first."""

    run: RecordedPass = field(repr=False)
    position: int
    threshold: float
    rows: list[str]
    tokens: list[str]
    source_tokens: list[str]
    predicted: str
    nodes: dict[str, Node]
    edges: list[Edge]
    feeding: dict[str, list[tuple[str, float]]]
    notices: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        """The API's answer: threshold, nodes, edges (each: kind, layer, head, source, target, weight, ...)."""
        edges = [{"kind": e.kind, "layer": e.layer, "head": e.head, "source": e.source, "target": e.target,
                  "weight": round(e.weight, 6), "source_stack": e.source_stack, "from": e.source_node,
                  "to": e.target_node, "through": e.through} for e in self.edges]
        return {"threshold": self.threshold, "position": self.position, "token": self.tokens[self.position],
                "predicted": self.predicted, "rows": self.rows,
                "split_before_the_norm": not self.run.config.norm_first,  # post-norm: x + f(x) is split, not LN(...)
                "nodes": [asdict(n) for n in self.nodes.values()], "edges": edges}


def part_groups(step: Step, parts: list[Part]) -> tuple[torch.Tensor, list[str]]:
    """Each part's group (the residual, one head, an output bias, the feed-forward) and the groups' names."""
    names: list[str] = []
    index = []
    for part in parts:
        if part.kind == "attention":
            name = head_name(step.layer, part.head) + (" (cross)" if part.attention == "cross" else "")
        elif part.kind == "bias":
            name = f"L{step.layer} {'cross-' if part.attention == 'cross' else ''}attention bias b_O"
        elif part.kind == "feed_forward":
            name = f"L{step.layer} feed-forward"
        else:
            name = "residual (the stream before)"
        if name not in names:
            names.append(name)
        index.append(names.index(name))
    return torch.tensor(index), names


class Tracer:
    """Walks the graph down from the prediction's node; ``tokens``, ``source_tokens``: the decoder's and the
    encoder's token labels."""

    def __init__(self, model, recording, threshold: float, tokens: list[str], source_tokens: list[str]):
        self.model, self.recording, self.threshold = model, recording, threshold
        self.steps = steps_of(model.config)
        self.tokens, self.source_tokens = tokens, source_tokens
        self.nodes: dict[str, Node] = {}
        self.edges: list[Edge] = []
        self.feeding: dict[str, list[tuple[str, float]]] = {}

    def stage(self, row: int) -> str:
        return "embeddings" if row == 0 else f"after {self.steps[row - 1].label}"

    def residual(self, row: int, position: int) -> str:
        layer = None if row == 0 else self.steps[row - 1].layer
        node = Node(residual_id(row, position), "residual", "decoder", row, layer, position, self.stage(row),
                    self.tokens[position])
        self.nodes.setdefault(node.id, node)
        return node.id

    def block(self, step: Step, position: int, sublayer: str) -> str:
        kind = {"self": "attention", "cross": "cross_attention", "ffn": "feed_forward"}[sublayer]
        node = Node(block_id(step.row, position, sublayer), kind, "decoder", step.row, step.layer, position,
                    f"L{step.layer} {kind.replace('_', '-')} output", self.tokens[position])
        self.nodes.setdefault(node.id, node)
        return node.id

    def source(self, step: Step, part: Part, target: int) -> tuple[str, int, str]:
        """(source node, source position, its stack) of a kept part."""
        if part.kind == "attention" and part.attention == "cross":
            node = Node(encoder_id(part.source), "residual", "encoder", -1, None, part.source, "encoder output",
                        self.source_tokens[part.source])
            self.nodes.setdefault(node.id, node)
            return node.id, part.source, "encoder"
        position = part.source if part.kind == "attention" else target
        return self.residual(step.row - 1, position), position, "decoder"

    def keep(self, step: Step, target: int, parts: list[Part], shares: torch.Tensor) -> set[int]:
        """The edges into (step.row, target) over the threshold; the decoder positions they come from."""
        into, reached = self.residual(step.row, target), set()
        for index in (shares > self.threshold).nonzero()[:, 0].tolist():
            part = parts[index]
            if part.kind == "bias":  # a constant: no source, no edge (its share still counts in the sum)
                continue
            source_node, source, stack = self.source(step, part, target)
            through = None if part.kind == "residual" else self.block(step, target, part.attention or "ffn")
            self.edges.append(Edge(part.kind, step.layer, part.head, source, target, float(shares[index]), stack,
                                   source_node, into, through))
            if stack == "decoder":
                reached.add(source)
        return reached

    def trace(self, position: int) -> None:
        """Every row from the top down: its reached nodes split, their edges over the threshold kept. The splitter
        (each sublayer's v W_O) lives for this call only: what the pass's cache keeps is the graph."""
        splitter = Splitter(self.model, self.recording)
        reached = {len(self.steps): {position}}
        self.residual(len(self.steps), position)
        for step in reversed(self.steps):
            targets = sorted(reached.get(step.row, ()))
            if not targets:
                continue
            groups = None
            for chunk, split in splitter.split(step, targets):
                if groups is None:
                    groups = part_groups(step, split.parts)
                for n, target in enumerate(chunk):
                    reached.setdefault(step.row - 1, set()).update(self.keep(step, target, split.parts, split.shares[n]))
                    summed = torch.zeros(len(groups[1])).index_add_(0, groups[0], split.shares[n])
                    top = summed.topk(min(FEEDING_SHOWN, len(summed)))
                    self.feeding[residual_id(step.row, target)] = [
                        (groups[1][g], float(s)) for g, s in zip(top.indices.tolist(), top.values.tolist()) if s > 0]
        self.edges.sort(key=lambda e: -e.weight)


def share_threshold(value) -> float:
    """The threshold a share must pass: a number between 0 and 1 (exclusive); None: the default."""
    if value is None or value == "":
        return DEFAULT_THRESHOLD
    threshold = number(value, "Threshold", "a share between 0 and 1, such as 0.04")
    if not 0 < threshold < 1:
        raise InputProblem(f"Threshold must be between 0 and 1 (a share of a residual vector), such as "
                           f"{DEFAULT_THRESHOLD}; got {echo(value)}.")
    return threshold


def prediction_routes(model, tokenizer, text: str, position=None, threshold=DEFAULT_THRESHOLD,
                      decoding: DecodingSettings = DecodingSettings(False)) -> Routes:
    """The routes of the prediction after ``position`` (−1 or None: the last token, ``default_position``) in the
    text's recorded pass. An encoder-decoder's decoder reads its own rewrite, decoded with ``decoding``."""
    threshold = share_threshold(threshold)
    run = recorded_pass(model, tokenizer, text, decoding)
    ids = run.read.target_ids
    tokens = token_labels(tokenizer, ids)
    chosen = None if position is None else pick(position, len(ids), "position")  # says what is allowed
    default, default_note = default_position(model, tokenizer, run, tokens)
    if chosen is None or whole_number(position, "position", -1, len(ids) - 1) == -1:
        position, notes = default, [default_note] if default_note else []
    else:
        position, notes = chosen, []
    source_tokens = token_labels(tokenizer, run.read.source_ids) if model.config.is_encoder_decoder else []

    def compute() -> Tracer:
        tracer = Tracer(model, run.recording, threshold, tokens, source_tokens)
        with torch.inference_mode():
            tracer.trace(position)
        return tracer

    tracer = run.cached(("routes", position, threshold), compute)
    predicted = token_labels(tokenizer, run.logits[position].argmax()[None])[0]
    return Routes(run, position, threshold, ["embeddings"] + [s.label for s in tracer.steps], tokens, source_tokens,
                  predicted, tracer.nodes, tracer.edges, tracer.feeding,
                  [*notes, layer_note(model), *run.read.notices])


def default_position(model, tokenizer, run: RecordedPass, tokens: list[str]) -> tuple[int, str]:
    """The position traced for −1 (the last), and a note where that is not the last token. A decoder-only model's
    last token predicts the text's next one. An encoder-decoder's decoder reads its own rewrite up to its last word,
    and there predicts whether to stop: where it predicts the end-of-text token, −1 traces the token before, whose
    prediction is the rewrite's last word (a real token: a word the model wrote, reading the source)."""
    last = len(tokens) - 1
    eos = model.generation_config.eos_token_id
    stops = eos if isinstance(eos, list) else [eos]
    if not model.config.is_encoder_decoder or last == 0 or int(run.logits[last].argmax()) not in stops:
        return last, ""
    end = token_labels(tokenizer, run.logits[last].argmax()[None])[0]
    return last - 1, (f"Position −1 traces how the rewrite's last word, {echo(tokens[last])}, was predicted (after token "
                      f"{last - 1}): after that word the model predicts {echo(end)}, the end of the line, its choice "
                      f"to stop. Type {last} to trace that choice.")


def layer_note(model) -> str:
    """This model's layer, and the sums the routes split into parts."""
    arch = describe(model)
    if arch.parallel_residual:
        split = "both blocks read the layer's input, and each one's output is split into its parts"
    elif arch.pre_norm:
        split = f"each block reads {arch.norm_of('x')}, and its output is split into its parts before it is added"
    else:
        split = f"the sum before each {arch.norm} is what is split"
    return f"This model's layer: {arch.residual_formula()} ({arch.norm}; {split}). The sums split: {split_sums(arch)}."


def split_sums(arch: Architecture) -> str:
    """The sums ``split`` cuts into parts, in this model's terms: its norm, b_V and b_O only where it has them.

        x + Σ_heads Σ_tokens A[i,j] · (Norm(x_j) W_V + b_V) W_O + b_O     an attention block (b_V: in each value)
        x + FFN(Norm(x))                                                   a feed-forward
    """
    def heads(reads: str, tokens: str = "tokens") -> str:
        value = arch.projection("v", reads, head="")
        value = f"({value})" if arch.has_bias("v") else value
        return f"Σ_heads Σ_{tokens} A[i,j] · {value} W_O" + (" + b_O" if arch.has_bias("o") else "")

    if arch.parallel_residual:
        return f"x + {heads(arch.sublayer_input('x_j'))} + FFN({arch.norm}_2(x)), both blocks at once"
    sums = [f"x + {heads(arch.sublayer_input('x_j'))} after attention"]
    if arch.encoder_decoder:
        sums.append(f"x + {heads('memory_j', 'source tokens')} after cross-attention")
    if arch.feed_forward != "none":
        sums.append(f"x + FFN({arch.sublayer_input('x')}) after the feed-forward")
    return "; ".join(sums)


@dataclass
class NodeReading:
    """A clicked node: the logit lens there (None for the encoder's output: the LM head does not read it), and what
    feeds it (name, share), largest first."""

    node: Node
    top: list[tuple[str, float]] | None
    feeding: list[tuple[str, float]]


def node_stream(routes: Routes, node: Node) -> torch.Tensor | None:
    """(D,) the decoder's residual stream at a residual node (a block node: the stream after its update)."""
    if node.stack == "encoder":
        return None
    steps = steps_of(routes.run.config)
    layer, name = (0, "input") if node.row == 0 else (steps[node.row - 1].layer, steps[node.row - 1].after)
    return routes.run.recording["decoder", layer, None, name][0, node.position]


def node_reading(routes: Routes, node_id) -> NodeReading:
    """What the residual stream at ``node_id`` would predict (the logit lens: ``lens.read_out``), and the heads and
    blocks feeding it (a block node: the edges through it)."""
    node = routes.nodes.get(str(node_id))
    if node is None:
        raise InputProblem(f"No node {echo(node_id, 40)} in this graph; click a node of the graph drawn.")
    stream, top = node_stream(routes, node), None
    if stream is not None:
        with torch.inference_mode():
            probs = read_out(routes.run.model, stream).float().softmax(-1)
        best = probs.topk(min(TOP_K, probs.shape[-1]))
        top = list(zip(token_labels(routes.run.tokenizer, best.indices), best.values.tolist()))
    if node.kind == "residual":
        feeding = routes.feeding.get(node.id, [])
    else:
        tokens = routes.source_tokens if node.kind == "cross_attention" else routes.tokens
        feeding = [(f"{head_name(e.layer, e.head)} from {e.source}:{tokens[e.source]}" if e.head is not None
                    else f"L{e.layer} feed-forward", e.weight) for e in routes.edges if e.through == node.id]
    return NodeReading(node, top, feeding)
