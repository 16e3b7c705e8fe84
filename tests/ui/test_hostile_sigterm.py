"""SIGTERM (how a Space stops the app on a restart) frees the unpacked uploads' disk, as a normal
exit does. `python app.py` in a process of its own (tests/support/app_process.py), an upload opened through its
real endpoint, then SIGTERM: the process ends and its uploads' folder is gone."""

import json
import signal
import zipfile

from gradio_client import Client, handle_file

from support import hub_repos
from support.app_process import start_app, stop_app


def test_sigterm_removes_the_unpacked_uploads(tiny_checkpoints, tmp_path):
    files = hub_repos.files_of(hub_repos.save_transformers_repo(tmp_path / "gpt2", "gpt2"))
    archive = tmp_path / "upload.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    temporary = tmp_path / "tmp"  # the process's temporary folder: its uploads' folder is made there
    temporary.mkdir()
    process, url, _ = start_app(tiny_checkpoints, env={"TMPDIR": str(temporary)})
    try:
        result, line = Client(url, verbose=False).predict(handle_file(str(archive)), api_name="/open_upload")
        assert result is not None, line
        [root] = temporary.glob("opened-models-*")
        assert list(root.rglob("model.safetensors"))
        process.send_signal(signal.SIGTERM)
        process.wait(60)
    finally:
        if process.poll() is None:
            stop_app(process)
    assert not root.exists(), json.dumps([str(p) for p in root.rglob("*")])
