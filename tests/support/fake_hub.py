"""A small Hugging Face Hub on 127.0.0.1, speaking the parts of the HTTP API that huggingface_hub 2.4 uses:

- reading: model info, refs (``list_repo_refs``), (``/api/models/{repo}`` and ``/revision/{rev}``, with ``files_metadata``: sizes, blob ids, LFS
  sha256), HEAD/GET on resolve URLs by branch, tag or commit (ETag, X-Repo-Commit, Content-Length), so
  ``from_pretrained``, ``hf_hub_download`` and ``HfApi.model_info`` run their real code;
- writing (``push_to_hub``, ``upload_folder``, ``ModelCard.push_to_hub``): whoami, create_repo, validate-yaml, preupload,
  commit with the files inline (the server answers "regular" upload mode, so no LFS/Xet transfer);
- signing in: an OpenID Connect provider as huggingface.co is one to a Space with ``hf_oauth: true`` (Gradio's
  ``gr.LoginButton`` runs authlib's client against it when OPENID_PROVIDER_URL is ``url``): the discovery document
  ``/.well-known/openid-configuration``, ``/oauth/authorize`` (the consent page of whoever is signed in to this Hub in
  that browser, ``login_cookie(user)``; "Authorize" sends the browser back to ``redirect_uri`` with a one-time code
  and the client's ``state``, "Deny" with ``error=access_denied``), ``/oauth/token`` (the code, the client's id and
  secret and the same ``redirect_uri`` for a new access token of that user, with the granted scopes, and an
  ``id_token``: a JWT with the ``nonce``, signed RS256 by ``signing_key()``), ``/oauth/jwks`` (its public half) and
  ``/oauth/userinfo``.

Repos live in memory: ``repos[repo_id]`` holds the default branch (``sha``, ``files``) and ``revisions[name]`` every
branch or tag (``add_repo``/``add_folder`` fill them). ``users`` maps a token to its user name (``whoami``); a commit
records who made it in ``authors``. Every request is logged in ``requests`` (what the client really did).
A token from the OAuth flow is in ``users`` too, and its scopes in ``scopes``: as on the Hub, it creates a repo only
under its own user and with ``contribute-repos`` or ``manage-repos``, and commits only with ``write-repos``,
``manage-repos``, or ``contribute-repos`` to a repo it created (``app_repos``); a personal token (not in ``scopes``)
may do anything. The OAuth client is ``client_id``/``client_secret``; ``grants`` lists (user, scope) per token issued.
A repo in ``hanging`` never answers; ``HangingHub`` is a server that takes connections and never answers."""

import base64
import hashlib
import html
import json
import re
import secrets
import socket
import threading
import time
from functools import cache
from http.cookies import SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlencode, urlparse

from joserfc import jwt  # what authlib itself verifies id tokens with (authlib.jose is deprecated in Authlib 1.9)
from joserfc.jwk import RSAKey

LOGIN_COOKIE = "fake_hub_token"  # who is signed in to this Hub in a browser (huggingface.co's own session cookie)
CREATE_SCOPES, WRITE_SCOPES = {"contribute-repos", "manage-repos"}, {"write-repos", "manage-repos"}


@cache
def signing_key() -> RSAKey:
    """The key every fake Hub signs its id tokens with (made once per process: 0.2 s)."""
    return RSAKey.generate_key(2048, parameters={"kid": "fake-hub-1", "use": "sig", "alg": "RS256"})


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
        # the OpenID provider: one registered client (the Space), its pending consents and one-time codes
        self.client_id, self.client_secret = "fake-space-client-id", "fake-space-client-secret"
        self.scopes: dict[str, set[str]] = {}  # OAuth access token -> the scopes granted
        self.grants: list[tuple[str, str]] = []  # (user, scope) of each access token issued
        self.app_repos: set[str] = set()  # repos created with an OAuth token (contribute-repos reaches these)
        self.consents: dict[str, dict] = {}  # consent id -> the authorize request waiting for the user's answer
        self.codes: dict[str, dict] = {}  # authorization code -> {user, client_id, redirect_uri, scope, nonce}
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

            def _token(self) -> str | None:
                return self.headers.get("Authorization", "").removeprefix("Bearer ").strip() or None

            def _html(self, status: int, body: str) -> None:
                self._send(status, f"<!doctype html><title>Fake Hub</title><body>{body}</body>".encode(),
                           {"Content-Type": "text/html; charset=utf-8"})

            def _redirect(self, location: str) -> None:
                self._send(302, b"", {"Location": location})

            def _browser_user(self) -> str | None:
                """Who is signed in to this Hub in the browser asking (its login cookie)."""
                cookie = SimpleCookie(self.headers.get("Cookie", ""))
                return hub.users.get(cookie[LOGIN_COOKIE].value) if LOGIN_COOKIE in cookie else None

            def _oauth_get(self, url) -> bool:
                """The provider's GET routes; False when ``url`` is none of them."""
                routes = {"/.well-known/openid-configuration": lambda query: self._json(200, hub.openid_configuration()),
                          "/oauth/jwks": lambda query: self._json(200, {"keys": [signing_key().as_dict(private=False)]}),
                          "/oauth/userinfo": self._userinfo, "/oauth/authorize": self._authorize,
                          "/oauth/consent": self._consent}
                if url.path not in routes:
                    return False
                routes[url.path]({key: values[0] for key, values in parse_qs(url.query).items()})
                return True

            def _userinfo(self, query: dict) -> None:
                if self._token() not in hub.scopes:
                    return self._json(401, {"error": "invalid_token"})
                self._json(200, hub.claims(hub.users[self._token()]))

            def _authorize(self, query: dict) -> None:
                """The consent page: which app asks what of the user signed in to this Hub in this browser."""
                if query.get("client_id") != hub.client_id or not query.get("redirect_uri"):
                    return self._html(400, "Unknown client, or no redirect_uri.")
                if query.get("response_type") != "code":
                    return self._html(400, "Only response_type=code is supported.")
                user = self._browser_user()
                if user is None:
                    return self._html(401, "<h1>Sign in to the Hub first</h1>")
                consent = secrets.token_urlsafe(12)
                hub.consents[consent] = {**query, "user": user}
                scopes = ", ".join(html.escape(scope) for scope in query.get("scope", "").split())
                self._html(200, f"<h1>Authorize the Space</h1><p id='consent-user'>Signed in as {html.escape(user)}</p>"
                                f"<p>It asks for: {scopes}</p>"
                                f"<a id='authorize' href='/oauth/consent?{urlencode(dict(id=consent, allow=1))}'>Authorize</a> "
                                f"<a id='deny' href='/oauth/consent?{urlencode(dict(id=consent, allow=0))}'>Deny</a>")

            def _consent(self, query: dict) -> None:
                """The user's answer: back to the client's redirect_uri with a one-time code, or with an error."""
                request = hub.consents.pop(query.get("id", ""), None)
                if request is None:
                    return self._html(400, "No such consent request.")
                back = {"state": request["state"]} if request.get("state") else {}
                if query.get("allow") == "1":
                    code = secrets.token_urlsafe(16)
                    hub.codes[code] = {key: request.get(key) for key in ("user", "client_id", "redirect_uri", "scope", "nonce")}
                    back = {"code": code, **back}
                else:
                    back = {"error": "access_denied", "error_description": "The user denied access", **back}
                separator = "&" if "?" in request["redirect_uri"] else "?"
                self._redirect(request["redirect_uri"] + separator + urlencode(back))

            def _oauth_token(self, body: bytes) -> None:
                """POST /oauth/token: an authorization code (once, by the client it was issued to, with the same
                redirect_uri) for an access token, and an id token when the scope has ``openid``."""
                form = {key: values[0] for key, values in parse_qs(body.decode()).items()}
                client_id, secret = form.get("client_id"), form.get("client_secret")
                auth = self.headers.get("Authorization", "")
                if auth.startswith("Basic "):
                    client_id, _, secret = base64.b64decode(auth[6:]).decode().partition(":")
                if (client_id, secret) != (hub.client_id, hub.client_secret):
                    return self._json(401, {"error": "invalid_client"})
                if form.get("grant_type") != "authorization_code":
                    return self._json(400, {"error": "unsupported_grant_type"})
                grant = hub.codes.pop(form.get("code", ""), None)
                if grant is None or grant["client_id"] != client_id or grant["redirect_uri"] != form.get("redirect_uri"):
                    return self._json(400, {"error": "invalid_grant"})
                token = "hf_oauth_" + secrets.token_hex(16)
                scope = grant["scope"] or ""
                hub.users[token], hub.scopes[token] = grant["user"], set(scope.split())
                hub.grants.append((grant["user"], scope))
                answer = {"access_token": token, "token_type": "bearer", "expires_in": 8 * 3600, "scope": scope}
                if "openid" in scope.split():
                    now = int(time.time())
                    claims = {**hub.claims(grant["user"]), "iss": hub.url, "aud": client_id, "iat": now,
                              "exp": now + 3600, "auth_time": now, **({"nonce": grant["nonce"]} if grant["nonce"] else {})}
                    answer["id_token"] = jwt.encode({"alg": "RS256", "kid": signing_key().kid}, claims, signing_key())
                self._json(200, answer)

            def _refused(self, repo_id: str, create: bool) -> str | None:
                """Why an OAuth token may not create (or commit to) ``repo_id``; None: it may (a personal token may)."""
                scopes = hub.scopes.get(self._token() or "")
                if scopes is None:
                    return None
                if repo_id.split("/")[0] != self._user():
                    return f"An OAuth token writes under its own user only, not {repo_id}"
                if create and not scopes & CREATE_SCOPES:
                    return "This OAuth token cannot create repos (scope contribute-repos or manage-repos needed)"
                if not create and not (scopes & WRITE_SCOPES or ("contribute-repos" in scopes and repo_id in hub.app_repos)):
                    return f"This OAuth token cannot write to {repo_id}"
                return None

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
                if self._oauth_get(url):
                    return
                if url.path == "/api/whoami-v2":
                    user = self._user()
                    if user is None:
                        return self._send(401, b'{"error": "Invalid credentials"}', {"Content-Type": "application/json"})
                    auth = ({"type": "oauth", "scope": " ".join(sorted(hub.scopes[self._token()]))}
                            if self._token() in hub.scopes else {"type": "access_token", "accessToken": {"role": "write"}})
                    return self._json(200, {"type": "user", "name": user, "fullname": user, "orgs": [], "auth": auth})
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
                if path == "/oauth/token":
                    return self._oauth_token(body)
                if path == "/api/validate-yaml":  # model cards: accept, no warnings
                    return self._json(200, {"errors": [], "warnings": []})
                if path == "/api/repos/create":
                    payload = json.loads(body)
                    repo_id = f"{payload['organization']}/{payload['name']}" if payload.get("organization") else payload["name"]
                    refused = self._refused(repo_id, create=True)
                    if refused:
                        return self._json(403, {"error": refused})
                    if self._token() in hub.scopes and repo_id not in hub.repos:
                        hub.app_repos.add(repo_id)
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
                    refused = self._refused(match.group(1), create=False)
                    if refused:
                        return self._json(403, {"error": refused})
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

    def openid_configuration(self) -> dict:
        """The discovery document, as huggingface.co's (its endpoints under ``url``)."""
        return {"issuer": self.url, "authorization_endpoint": f"{self.url}/oauth/authorize",
                "token_endpoint": f"{self.url}/oauth/token", "userinfo_endpoint": f"{self.url}/oauth/userinfo",
                "jwks_uri": f"{self.url}/oauth/jwks", "response_types_supported": ["code"],
                "grant_types_supported": ["authorization_code"], "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["RS256"],
                "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
                "scopes_supported": ["openid", "profile", "email", "read-repos", "contribute-repos", "write-repos",
                                     "manage-repos"]}

    def claims(self, user: str) -> dict:
        """What the Hub tells about ``user`` (the id token's claims, userinfo)."""
        return {"sub": hashlib.sha1(user.encode()).hexdigest()[:24], "name": user.capitalize(),
                "preferred_username": user, "profile": f"{self.url}/{user}", "picture": f"{self.url}/avatars/{user}.png"}

    def login_cookie(self, user: str) -> dict:
        """A browser cookie that signs ``user`` in to this Hub (its consent page then asks ``user``): name, value, url."""
        token = next(token for token, name in self.users.items() if name == user and token not in self.scopes)
        return {"name": LOGIN_COOKIE, "value": token, "url": self.url}

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
