"""The app as a client sees it over HTTP: a raw call to an endpoint (``call_raw``), a plot as the client receives it
(``figure``) and its arrays (``plotly_array``)."""

import base64
import json

import numpy as np
import requests


def figure(plot) -> dict:
    """A gr.Plot's value as the client receives it -> the plotly figure dict."""
    assert plot["type"] == "plotly"
    return json.loads(plot["plot"])


def plotly_array(value) -> np.ndarray:
    """An array of a figure as plotly's JSON holds it: a list, or a typed array {"dtype", "bdata" (base64), "shape"}."""
    if isinstance(value, list):
        return np.asarray(value)
    shape = [int(n) for n in str(value.get("shape", -1)).split(",")]
    return np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"])).reshape(shape)


def call_raw(url: str, api_name: str, data: list) -> tuple[str, object]:
    """POST /gradio_api/call/<api_name> with ``data`` as JSON (ASCII-escaped, so lone surrogates arrive as
    such); -> (the final SSE event name, its data)."""
    body = json.dumps({"data": data})  # ensure_ascii: "\ud800" travels as the escape \\ud800
    event_id = requests.post(f"{url}gradio_api/call/{api_name}", data=body,
                             headers={"Content-Type": "application/json"}, timeout=30).json()["event_id"]
    event, payload = None, None
    with requests.get(f"{url}gradio_api/call/{api_name}/{event_id}", stream=True, timeout=60) as stream:
        for line in stream.iter_lines(decode_unicode=True):
            if line.startswith("event: "):
                event = line[len("event: "):]
            elif line.startswith("data: ") and event in ("complete", "error"):
                payload = json.loads(line[len("data: "):])
                break
    return event, payload
