"""A small Hugging Face Hub on 127.0.0.1, speaking the parts of the HTTP API that huggingface_hub 2.4 uses:

- reading: model info, refs (``list_repo_refs``), (``/api/models/{repo}`` and ``/revision/{rev}``, with ``files_metadata``: sizes, blob ids, LFS
  sha256), HEAD/GET on resolve URLs by branch, tag or commit (ETag, X-Repo-Commit, Content-Length), so
  ``from_pretrained``, ``hf_hub_download`` and ``HfApi.model_info`` run their real code;
- writing (``push_to_hub``, ``upload_folder``, ``ModelCard.push_to_hub``): whoami, create_repo, validate-yaml, preupload,
  commit with the files inline (the server answers "regular" upload mode, so no LFS/Xet transfer).

Repos live in memory: ``repos[repo_id]`` holds the default branch (``sha``, ``files``) and ``revisions[name]`` every
branch or tag (``add_repo``/``add_folder`` fill them). ``users`` maps a token to its user name (``whoami``); a commit
records who made it in ``authors``. Every request is logged in ``requests`` (what the client really did).
A repo in ``hanging`` never answers; ``HangingHub`` is a server that takes connections and never answers."""

import base64
import hashlib
import json
import re
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlparse


def _sha(files: dict, salt: bytes = b"") -> str:
    digest = hashlib.sha1(salt)
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + hashlib.sha256(files[name]).digest())
    return digest.hexdigest()


class FakeHub:
    def __init__(self, users: dict[str, str] | None = None):
        self.repos: dict[str, dict] = {}  # repo_id -> {"sha", "files", "revisions": {name: {"sha", "files"}}}
        self.requests: list[str] = []
        self.users = dict(users or {"hf_dummy_token_for_tests": "tester"})
        self.authors: dict[str, list[str]] = {}  # repo_id -> the user of each commit
        self.hanging: set[str] = set()  # repo ids whose every request hangs until the server closes
        self.gated: set[str] = set()  # repo ids that answer 403 GatedRepo (an access request is needed)
        self.closing = threading.Event()
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def _send(self, status: int, body: bytes = b"", headers: dict | None = None, head: bool = False):
                self.send_response(status)
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                if "Content-Length" not in (headers or {}):
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if not head:
                    self.wfile.write(body)

            def _json(self, status: int, payload) -> None:
                self._send(status, json.dumps(payload).encode(), {"Content-Type": "application/json"})

            def _body(self) -> bytes:
                return self.rfile.read(int(self.headers.get("Content-Length", 0) or 0))

            def _user(self) -> str | None:
                auth = self.headers.get("Authorization", "")
                return hub.users.get(auth.removeprefix("Bearer ").strip()) if auth else None

            def _hang(self) -> bool:
                """A request about a hanging repo: say nothing until the server closes."""
                if any(f"/{repo}/" in self.path + "/" or f"/{repo}?" in self.path for repo in hub.hanging):
                    hub.closing.wait()
                    return True
                return False

            def do_HEAD(self):
                if not self._hang():
                    self._resolve(head=True)

            def do_GET(self):
                hub.requests.append(f"GET {self.path}")
                if self._hang():
                    return
                url = urlparse(self.path)
                if url.path == "/api/whoami-v2":
                    user = self._user()
                    if user is None:
                        return self._send(401, b'{"error": "Invalid credentials"}', {"Content-Type": "application/json"})
                    return self._json(200, {"type": "user", "name": user, "fullname": user, "orgs": [],
                                            "auth": {"type": "access_token", "accessToken": {"role": "write"}}})
                match = re.fullmatch(r"/api/models/([^/]+/[^/]+)/refs", url.path)
                if match:  # branches: every named revision (tags are not told apart here)
                    repo = hub.repos.get(match.group(1))
                    if repo is None:
                        return self._send(404, b"{}", {"X-Error-Code": "RepoNotFound"})
                    named = {"main": repo["sha"], **{n: r["sha"] for n, r in repo["revisions"].items() if n != r["sha"]}}
                    return self._json(200, {"branches": [{"name": n, "ref": f"refs/heads/{n}", "targetCommit": sha}
                                                         for n, sha in named.items()], "tags": [], "converts": []})
                match = re.fullmatch(r"/api/models/([^/]+/[^/]+|[^/]+)(?:/revision/(.+))?", url.path)
                if match:
                    repo = hub.repos.get(match.group(1))
                    if repo is None:
                        return self._send(404, b"{}", {"X-Error-Code": "RepoNotFound"})
                    if match.group(1) in hub.gated:
                        return self._send(403, b'{"error": "Access to this repo is restricted"}',
                                          {"X-Error-Code": "GatedRepo", "X-Error-Message": "Access is restricted"})
                    state = hub.state(match.group(1), unquote(match.group(2) or "main"))
                    if state is None:
                        return self._send(404, b"{}", {"X-Error-Code": "RevisionNotFound"})
                    siblings = [{"rfilename": name, "size": len(data), "blobId": hashlib.sha1(data).hexdigest(),
                                 "lfs": {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}}
                                for name, data in sorted(state["files"].items())]
                    return self._json(200, {"id": match.group(1), "modelId": match.group(1), "sha": state["sha"],
                                            "private": False, "siblings": siblings})
                self._resolve(head=False)

            def _resolve(self, head: bool):
                if head:
                    hub.requests.append(f"HEAD {self.path}")
                match = re.fullmatch(r"/([^/]+/[^/]+|[^/]+)/resolve/([^/]+)/(.+)", urlparse(self.path).path)
                if not match:
                    return self._send(404, b"not found", {"X-Error-Code": "EntryNotFound"}, head)
                if match.group(1) not in hub.repos:
                    return self._send(404, b"", {"X-Error-Code": "RepoNotFound"}, head)
                state = hub.state(match.group(1), unquote(match.group(2)))
                if state is None:
                    return self._send(404, b"", {"X-Error-Code": "RevisionNotFound"}, head)
                data = state["files"].get(unquote(match.group(3)))
                if data is None:
                    return self._send(404, b"", {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": state["sha"]}, head)
                etag = hashlib.sha256(data).hexdigest()
                self._send(200, data, {"X-Repo-Commit": state["sha"], "ETag": f'"{etag}"',
                                       "Content-Length": str(len(data)), "Content-Type": "application/octet-stream"}, head)

            def do_POST(self):
                hub.requests.append(f"POST {self.path}")
                path, body = urlparse(self.path).path, self._body()
                if path == "/api/validate-yaml":  # model cards: accept, no warnings
                    return self._json(200, {"errors": [], "warnings": []})
                if path == "/api/repos/create":
                    payload = json.loads(body)
                    repo_id = f"{payload['organization']}/{payload['name']}" if payload.get("organization") else payload["name"]
                    if repo_id in hub.repos and not payload.get("exist_ok", True):
                        return self._json(409, {"error": "exists", "url": f"http://{self.headers['Host']}/{repo_id}"})
                    hub.repos.setdefault(repo_id, {"sha": "0" * 40, "files": {}, "revisions": {}})
                    return self._json(200, {"url": f"http://{self.headers['Host']}/{repo_id}", "name": repo_id})
                match = re.fullmatch(r"/api/models/([^/]+/[^/]+)/preupload/([^/]+)", path)
                if match:
                    files = json.loads(body)["files"]
                    return self._json(200, {"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                                                      for f in files]})
                match = re.fullmatch(r"/api/models/([^/]+/[^/]+)/commit/([^/]+)", path)
                if match:
                    files = dict(hub.repos.get(match.group(1), {}).get("files", {}))
                    for line in body.decode().splitlines():
                        item = json.loads(line)
                        if item["key"] == "file":
                            value = item["value"]
                            files[value["path"]] = base64.b64decode(value["content"])
                        elif item["key"] in ("deletedFile", "deletedFolder"):
                            files.pop(item["value"]["path"], None)
                    sha = hub.add_repo(match.group(1), files, salt=body)
                    hub.authors.setdefault(match.group(1), []).append(self._user())
                    url = f"http://{self.headers['Host']}/{match.group(1)}"
                    return self._json(200, {"commitUrl": f"{url}/commit/{sha}", "commitOid": sha})
                self._send(404, b"{}", {"X-Error-Code": "EntryNotFound"})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def add_repo(self, repo_id: str, files: dict[str, bytes], revision: str = "main", salt: bytes = b"") -> str:
        """Commit ``files`` (the whole tree) to ``revision`` of ``repo_id``; returns the commit sha."""
        sha = _sha(files, salt + revision.encode())
        repo = self.repos.setdefault(repo_id, {"sha": "0" * 40, "files": {}, "revisions": {}})
        repo["revisions"][revision] = {"sha": sha, "files": dict(files)}
        repo["revisions"][sha] = repo["revisions"][revision]
        if revision == "main":
            repo["sha"], repo["files"] = sha, dict(files)
        return sha

    def add_folder(self, repo_id: str, folder, revision: str = "main", extra: dict[str, bytes] | None = None) -> str:
        """Commit every file of ``folder`` (and ``extra``) to ``revision``."""
        files = {str(p.relative_to(folder)): p.read_bytes() for p in sorted(Path(folder).rglob("*")) if p.is_file()}
        return self.add_repo(repo_id, {**files, **(extra or {})}, revision)

    def state(self, repo_id: str, revision: str) -> dict | None:
        """{"sha", "files"} of a branch, tag or commit of ``repo_id`` (None: no such revision)."""
        repo = self.repos[repo_id]
        if revision == "main" or revision == repo["sha"]:
            return {"sha": repo["sha"], "files": repo["files"]}
        return repo.get("revisions", {}).get(revision)

    def downloads(self, repo_id: str, filename: str) -> int:
        """How many times a file's content was sent (GET on a resolve URL)."""
        return sum(1 for r in self.requests if r.startswith(f"GET /{repo_id}/resolve/") and r.endswith(f"/{filename}"))

    def __enter__(self) -> "FakeHub":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.closing.set()
        self.server.shutdown()
        self.server.server_close()


class HangingHub:
    """A server that accepts connections (the kernel's backlog does) and never answers a byte."""

    def __init__(self):
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(64)
        self.url = f"http://127.0.0.1:{self.socket.getsockname()[1]}"

    def __enter__(self) -> "HangingHub":
        return self

    def __exit__(self, *exc) -> None:
        self.socket.close()
