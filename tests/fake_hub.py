"""A small Hugging Face Hub on 127.0.0.1, speaking the parts of the HTTP API that huggingface_hub 2.4
uses for ``push_to_hub`` (create_repo, validate-yaml for the model card, preupload, commit with the
files inline: the server answers "regular" upload mode, so no LFS/Xet transfer) and for
``from_pretrained`` by repo id (model info, HEAD/GET on resolve URLs with ETag and X-Repo-Commit). Repos live in memory; every request is
logged in ``requests`` so tests can check what the client really did."""

import base64
import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlparse


class FakeHub:
    def __init__(self):
        self.repos: dict[str, dict] = {}  # repo_id -> {"sha": str, "files": {path: bytes}}
        self.requests: list[str] = []
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

            def do_HEAD(self):
                self._resolve(head=True)

            def do_GET(self):
                hub.requests.append(f"GET {self.path}")
                path = urlparse(self.path).path
                match = re.fullmatch(r"/api/models/([^/]+/[^/]+)(?:/revision/([^/]+))?", path)
                if match:
                    repo = hub.repos.get(match.group(1))
                    if repo is None:
                        return self._send(404, b"{}", {"X-Error-Code": "RepoNotFound"})
                    return self._json(200, {"id": match.group(1), "modelId": match.group(1), "sha": repo["sha"],
                                            "siblings": [{"rfilename": f} for f in sorted(repo["files"])]})
                self._resolve(head=False)

            def _resolve(self, head: bool):
                if head:
                    hub.requests.append(f"HEAD {self.path}")
                match = re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", urlparse(self.path).path)
                if not match:
                    return self._send(404, b"not found", {"X-Error-Code": "EntryNotFound"}, head)
                repo = hub.repos.get(match.group(1))
                if repo is None:
                    return self._send(404, b"", {"X-Error-Code": "RepoNotFound"}, head)
                data = repo["files"].get(unquote(match.group(3)))
                if data is None:
                    return self._send(404, b"", {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": repo["sha"]}, head)
                etag = hashlib.sha256(data).hexdigest()
                self._send(200, data, {"X-Repo-Commit": repo["sha"], "ETag": f'"{etag}"',
                                       "Content-Length": str(len(data)), "Content-Type": "application/octet-stream"}, head)

            def do_POST(self):
                hub.requests.append(f"POST {self.path}")
                path, body = urlparse(self.path).path, self._body()
                if path == "/api/validate-yaml":  # model cards: accept, no warnings
                    return self._json(200, {"errors": [], "warnings": []})
                if path == "/api/repos/create":
                    payload = json.loads(body)
                    repo_id = f"{payload['organization']}/{payload['name']}" if payload.get("organization") else payload["name"]
                    hub.repos.setdefault(repo_id, {"sha": "0" * 40, "files": {}})
                    return self._json(200, {"url": f"http://{self.headers['Host']}/{repo_id}", "name": repo_id})
                match = re.fullmatch(r"/api/models/([^/]+/[^/]+)/preupload/([^/]+)", path)
                if match:
                    files = json.loads(body)["files"]
                    return self._json(200, {"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                                                      for f in files]})
                match = re.fullmatch(r"/api/models/([^/]+/[^/]+)/commit/([^/]+)", path)
                if match:
                    repo = hub.repos.setdefault(match.group(1), {"sha": "0" * 40, "files": {}})
                    for line in body.decode().splitlines():
                        item = json.loads(line)
                        if item["key"] == "file":
                            value = item["value"]
                            repo["files"][value["path"]] = base64.b64decode(value["content"])
                        elif item["key"] in ("deletedFile", "deletedFolder"):
                            repo["files"].pop(item["value"]["path"], None)
                    repo["sha"] = hashlib.sha1(json.dumps(sorted(repo["files"])).encode() + body).hexdigest()
                    url = f"http://{self.headers['Host']}/{match.group(1)}"
                    return self._json(200, {"commitUrl": f"{url}/commit/{repo['sha']}", "commitOid": repo["sha"]})
                self._send(404, b"{}", {"X-Error-Code": "EntryNotFound"})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "FakeHub":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
