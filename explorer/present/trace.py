"""Inside the forward pass: the trace as a table.
"""

from explorer.views.trace import ForwardTrace


def where_text(source: str, stack: str) -> str:
    """A tensor's place in the model's output as a trail that wraps between its parts:
    'recording.decoder.layers[0].self_attention.query' -> 'layers[0] › self_attention › query'."""
    prefix = f"recording.{stack}."
    return (source[len(prefix):] if stack and source.startswith(prefix) else source).replace(".", " › ")


def trace_table(trace: ForwardTrace) -> list[list[str]]:
    """Rows for a table: stack, step, shape, what each dimension is, meaning, where it is in the model's output."""
    return [[s.stack, s.step, "(" + ", ".join(map(str, s.shape)) + ")" if s.shape else "—", s.dims_text(), s.meaning,
             where_text(s.source, s.stack)] for s in trace.steps]
