"""Push a model trained in the app (Train one yourself's zip and its JSON) to the visitor's own Hub account: a new
repo with the weights, the tokenizer, our model code (``trust_remote_code=True`` loads it without our package), the
loss curve (a PNG and the numbers) and a ``ModelCard`` with the training settings and how to load it.

The token is the visitor's own, passed per call (the app takes it from ``gr.OAuthToken``), or the machine's for the
operator alone (``hub_files.for_operator``: not a Space, listening on loopback only): it goes to one ``HfApi`` for
this push and nowhere else, so two visitors pushing at once each push as themselves. A push writes only into a repo
this app created (``MARKER_FILE`` in it): a new one (``create_repo(exist_ok=False)``), or one it pushed before.
"""

import json
import tempfile
import time
from pathlib import Path

from huggingface_hub import HfApi, ModelCard, ModelCardData, get_token
from huggingface_hub import errors as hub_errors
from PIL import Image, ImageDraw

from modeling import ScratchTransformerForCausalLM

from explorer.models import catalog
from explorer.models.hub_files import check_repo_id, endpoint, for_operator, hub_error_message, on_space
from explorer.models.plans import (OURS, check_shard_index, count_parameters, family_name, read_config,
                                   require_parameters)
from explorer.models.uploads import unpack_zip
from explorer.core.inputs import InputProblem, echo

CURVE_FILE, LOG_FILE = "loss_curve.png", "training_log.json"
MARKER_FILE = "made_by_scratch_transformer_app.json"  # in every repo this app creates: the only ones it writes into


def loss_curve_png(steps: list[int], losses: list[float], path: Path, size=(640, 360)) -> Path:
    """The loss at each logged step as a line on axes (Pillow: no plotting stack to install for one picture)."""
    width, height = size
    image = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(image)
    left, right, top, bottom = 60, width - 20, 30, height - 40
    draw.rectangle([left, top, right, bottom], outline="#888")
    draw.text((left, 8), "Training loss (nats per token) by step", fill="black")
    if losses:
        low, high = 0.0, max(losses) * 1.1 or 1.0
        last = max(max(steps), 1)
        points = [(left + (right - left) * s / last, bottom - (bottom - top) * (v - low) / (high - low))
                  for s, v in zip(steps, losses)]
        draw.line(points, fill="#1f77b4", width=3) if len(points) > 1 else None
        for x, y in points:
            draw.ellipse([x - 3, y - 3, x + 3, y + 3], fill="#1f77b4")
        for value in (low, high / 2, high):
            y = bottom - (bottom - top) * (value - low) / (high - low)
            draw.text((8, y - 6), f"{value:.2f}", fill="black")
        draw.text((left, bottom + 8), "0", fill="black")
        draw.text((right - 40, bottom + 8), f"{last}", fill="black")
        draw.text(((left + right) // 2 - 15, bottom + 20), "step", fill="black")
    image.save(path)
    return path


def model_card(repo_id: str, job: dict, has_tokenizer: bool) -> ModelCard:
    """The card: what was trained and how, the loss curve, how to load it."""
    settings = job.get("settings", {})
    rows = "\n".join(f"| {key} | {echo(value, 60) if isinstance(value, str) else value} |" for key, value in settings.items())
    losses = job.get("losses") or []
    trend = f"{losses[0]:.3f} → {losses[-1]:.3f} nats per token" if losses else "no loss logged"
    data = ModelCardData(library_name="transformers", pipeline_tag="text-generation", license="mit",
                         tags=["scratch-transformer", "trained-in-the-browser", "custom_code"])
    tokenizer_line = ("tokenizer = AutoTokenizer.from_pretrained(repo)\n" if has_tokenizer else
                      "# trained on random tokens: no tokenizer; feed token ids\n")
    content = f"""---
{data.to_yaml()}
---

# {repo_id.split("/")[-1]}

A small Transformer trained from scratch in the browser, in the *Train one yourself* tab of the Space
"A Transformer from scratch": {job.get("steps_done", "?")} steps{" (stopped early)" if job.get("stopped") else ""},
{job.get("seconds", "?")} s, loss {trend}.

## Training settings

| setting | value |
|---|---|
{rows}

## Loss curve

![Training loss]({CURVE_FILE})

The numbers are in [{LOG_FILE}]({LOG_FILE}) (one loss per logged step, and every head's induction score).

## How to load it

```python
from transformers import AutoModelForCausalLM, AutoTokenizer

repo = "{repo_id}"
model = AutoModelForCausalLM.from_pretrained(repo, trust_remote_code=True)  # the model code ships in this repo
{tokenizer_line}```

Or open it in the Space: *Open a model*, repo id `{repo_id}`. The Space loads it with its own classes and runs
none of this repo's code.
"""
    return ModelCard(content)


def default_repo_name(job: dict) -> str:
    settings = job.get("settings", {})
    return f"scratch-transformer-{settings.get('position_encoding', 'model')}-{time.strftime('%Y%m%d-%H%M%S')}"


def visitor_token(oauth_token: str | None) -> str | None:
    """Whose account a push goes to: the signed-in visitor's OAuth token; for the operator alone (not a Space, the
    app listening on loopback only), the account logged in on the machine (``hf auth login`` or HF_TOKEN)."""
    if oauth_token:
        return oauth_token
    return get_token() if for_operator() else None


def sign_in_first() -> str:
    """What to do to push without a token: on a Space, Sign in; elsewhere, log in on the machine and serve on loopback."""
    if on_space():
        return "Sign in with Hugging Face first (the Sign in button beside Push): the model goes to your own account."
    return ("Pushing needs a Hugging Face account: on the machine running the app, log in with `hf auth login` (or set "
            "HF_TOKEN) and serve the app on loopback only (127.0.0.1, the default of `python app.py`); the machine's "
            "token pushes only for the person at that machine.")


def _claim(api: HfApi, repo_id: str, private: bool) -> None:
    """Create ``repo_id``, or accept it only where this app created it (its ``MARKER_FILE``); never write into a repo
    of anyone's own making."""
    try:
        api.create_repo(repo_id, private=bool(private), exist_ok=False)
        return
    except hub_errors.HfHubHTTPError as error:
        if getattr(error.response, "status_code", None) != 409:
            raise
    if not api.file_exists(repo_id, MARKER_FILE):
        raise InputProblem(f"{echo(repo_id)} already exists and was not made by this app: it writes only into repos it "
                           "created. Give another name.")


def check_trained(unpacked: Path) -> None:
    """A trained model's unpacked zip checked before anything is built from it, as Open a model checks a folder: the
    zip is the client's to send (the endpoint takes any file a visitor uploaded), so it must hold one of ours whose
    config counts within the parameter limit (a config of 10^6 layers would fill the memory as it was built), and
    a shard index naming files beside it, by name (a path would read weights from elsewhere on the server)."""
    where = "The trained model's zip"
    if not (unpacked / "config.json").exists():
        raise InputProblem(f"{where} holds no config.json: train the model again.")
    raw = read_config((unpacked / "config.json").read_bytes(), where)
    if raw["model_type"] != OURS:
        raise InputProblem(f"{where} holds a {family_name(raw['model_type'])} model; Push sends the models Train one "
                           f"yourself trains ({OURS}).")
    require_parameters(count_parameters(raw), where)
    files = [path.name for path in unpacked.iterdir()]
    for index in unpacked.glob("*.index.json"):
        check_shard_index(index.read_bytes(), index.name, files, where)


def push_trained(archive, job, token: str | None, repo_name: str | None = None, private: bool = False) -> dict:
    """Push the zip of a trained model (and its job JSON: settings, losses) to ``<the token's user>/<repo_name>``;
    returns {"repo_id", "url", "commit"}."""
    if not token:
        raise InputProblem(sign_in_first())
    if not archive or not Path(str(archive)).is_file():
        raise InputProblem("Train a model first: the push sends the model the tab just trained.")
    job = job if isinstance(job, dict) else {}
    name = (repo_name or "").strip() or default_repo_name(job)
    if "/" in name:
        raise InputProblem(f"Give the repo's name only ({echo(name)} has a `/`): it goes under your own account.")
    check_repo_id(name)
    api = HfApi(endpoint=endpoint(), token=token)  # this visitor's token, for this push only
    try:
        user = api.whoami()["name"]
    except Exception as error:  # noqa: BLE001
        raise InputProblem(f"The Hub did not accept your sign-in: {hub_error_message(error)}") from None
    repo_id = f"{user}/{name}"
    with tempfile.TemporaryDirectory(prefix="push-") as tmp:
        unpacked = unpack_zip(Path(str(archive)), Path(tmp) / "unpacked")
        check_trained(unpacked)
        with catalog.LOAD_LOCK:
            model = ScratchTransformerForCausalLM.from_pretrained(unpacked, trust_remote_code=False)
        folder = Path(tmp) / "repo"
        model.save_pretrained(folder)  # with our model code and auto_map (modeling registers its auto classes)
        has_tokenizer = (unpacked / "tokenizer.json").exists()
        for file in unpacked.iterdir():
            if file.name.startswith(("tokenizer", "special_tokens")):
                (folder / file.name).write_bytes(file.read_bytes())
        loss_curve_png(job.get("logged_steps") or [], job.get("losses") or [], folder / CURVE_FILE)
        (folder / LOG_FILE).write_text(json.dumps(job, indent=1))
        model_card(repo_id, job, has_tokenizer).save(folder / "README.md")
        (folder / MARKER_FILE).write_text(json.dumps({"made_by": "A Transformer from scratch (the app's Push)"}))
        try:
            _claim(api, repo_id, private)
            commit = api.upload_folder(repo_id=repo_id, folder_path=folder,
                                       commit_message="A Transformer trained from scratch in the browser")
        except InputProblem:
            raise
        except Exception as error:  # noqa: BLE001
            raise InputProblem(f"The push to {echo(repo_id)} failed: {hub_error_message(error)}") from None
    return {"repo_id": repo_id, "url": f"{endpoint().rstrip('/')}/{repo_id}", "commit": commit.oid}
