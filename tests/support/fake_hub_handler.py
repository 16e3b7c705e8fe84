"""How the fake Hub (fake_hub.py) answers HTTP: ``HubHandler``, one request at a time, reading and writing the Hub's
state through its server (``self.server.hub``, a ``FakeHub``). One method per route family:

- reading: ``_api_get`` (whoami, refs, model info by revision) and ``_resolve`` (HEAD/GET of a file at a branch, tag or
  commit);
- writing: ``_create_repo``, ``_preupload``, ``_commit``, each refused to an OAuth token without the scope (``_refused``);
- signing in, the OpenID provider: ``_oauth_get`` (discovery, keys, userinfo, the consent page and its answer) and
  ``_oauth_token`` (a code for an access token and a signed id token)."""

import base64
import hashlib
import html
import json
import re
import secrets
import time
from functools import cache
from http.cookies import SimpleCookie
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, unquote, urlencode, urlparse

from joserfc import jwt  # what authlib itself verifies id tokens with (authlib.jose is deprecated in Authlib 1.9)
from joserfc.jwk import RSAKey

LOGIN_COOKIE = "fake_hub_token"  # who is signed in to this Hub in a browser (huggingface.co's own session cookie)
CREATE_SCOPES, WRITE_SCOPES = {"contribute-repos", "manage-repos"}, {"write-repos", "manage-repos"}


@cache
def signing_key() -> RSAKey:
    """The key every fake Hub signs its id tokens with (made once per process: 0.2 s)."""
    return RSAKey.generate_key(2048, parameters={"kid": "fake-hub-1", "use": "sig", "alg": "RS256"})


class HubHandler(BaseHTTPRequestHandler):
    """One request to the fake Hub. Its state is ``self.hub``, the FakeHub its server was made for."""

    @property
    def hub(self):
        return self.server.hub

    def log_message(self, *args):  # keep test output clean
        pass

    # ---- what every route uses: the answer's forms, the request's token and user --------------------------------

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

    def _html(self, status: int, body: str) -> None:
        self._send(status, f"<!doctype html><title>Fake Hub</title><body>{body}</body>".encode(),
                   {"Content-Type": "text/html; charset=utf-8"})

    def _redirect(self, location: str) -> None:
        self._send(302, b"", {"Location": location})

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length", 0) or 0))

    def _token(self) -> str | None:
        return self.headers.get("Authorization", "").removeprefix("Bearer ").strip() or None

    def _user(self) -> str | None:
        auth = self.headers.get("Authorization", "")
        return self.hub.users.get(auth.removeprefix("Bearer ").strip()) if auth else None

    def _browser_user(self) -> str | None:
        """Who is signed in to this Hub in the browser asking (its login cookie)."""
        cookie = SimpleCookie(self.headers.get("Cookie", ""))
        return self.hub.users.get(cookie[LOGIN_COOKIE].value) if LOGIN_COOKIE in cookie else None

    def _hang(self) -> bool:
        """A request about a hanging repo: say nothing until the server closes."""
        if any(f"/{repo}/" in self.path + "/" or f"/{repo}?" in self.path for repo in self.hub.hanging):
            self.hub.closing.wait()
            return True
        return False

    # ---- the HTTP methods: which route family answers ------------------------------------------------------------

    def _hidden(self, repo_id: str) -> bool:
        """A private repo, asked by anyone but its owner: it does not exist for them."""
        return repo_id in self.hub.private and self._user() != repo_id.split("/")[0]

    def do_HEAD(self):
        self.hub.tokens_seen.append(self._token())
        if not self._hang():
            self._resolve(head=True)

    def do_GET(self):
        self.hub.requests.append(f"GET {self.path}")
        self.hub.tokens_seen.append(self._token())
        if self._hang():
            return
        url = urlparse(self.path)
        if not (self._oauth_get(url) or self._api_get(url.path)):
            self._resolve(head=False)

    def do_POST(self):
        self.hub.requests.append(f"POST {self.path}")
        self.hub.tokens_seen.append(self._token())
        path, body = urlparse(self.path).path, self._body()
        if path == "/oauth/token":
            self._oauth_token(body)
        elif path == "/api/validate-yaml":  # model cards: accept, no warnings
            self._json(200, {"errors": [], "warnings": []})
        elif path == "/api/repos/create":
            self._create_repo(json.loads(body))
        elif re.fullmatch(r"/api/models/([^/]+/[^/]+)/preupload/([^/]+)", path):
            self._preupload(json.loads(body)["files"])
        elif match := re.fullmatch(r"/api/models/([^/]+/[^/]+)/commit/([^/]+)", path):
            self._commit(match.group(1), body)
        else:
            self._send(404, b"{}", {"X-Error-Code": "EntryNotFound"})

    # ---- reading: the API, and files by revision -----------------------------------------------------------------

    def _api_get(self, path: str) -> bool:
        """The API's GET routes (whoami, refs, model info); False when ``path`` is none of them."""
        if path == "/api/whoami-v2":
            self._whoami()
        elif match := re.fullmatch(r"/api/models/([^/]+/[^/]+)/refs", path):
            self._refs(match.group(1))
        elif match := re.fullmatch(r"/api/models/([^/]+/[^/]+|[^/]+)(?:/revision/(.+))?", path):
            self._model_info(match.group(1), unquote(match.group(2) or "main"))
        else:
            return False
        return True

    def _whoami(self) -> None:
        user = self._user()
        if user is None:
            return self._send(401, b'{"error": "Invalid credentials"}', {"Content-Type": "application/json"})
        auth = ({"type": "oauth", "scope": " ".join(sorted(self.hub.scopes[self._token()]))}
                if self._token() in self.hub.scopes else {"type": "access_token", "accessToken": {"role": "write"}})
        self._json(200, {"type": "user", "name": user, "fullname": user, "orgs": [], "auth": auth})

    def _refs(self, repo_id: str) -> None:
        """Branches: every named revision (tags are not told apart here)."""
        repo = self.hub.repos.get(repo_id)
        if repo is None:
            return self._send(404, b"{}", {"X-Error-Code": "RepoNotFound"})
        named = {"main": repo["sha"], **{n: r["sha"] for n, r in repo["revisions"].items() if n != r["sha"]}}
        self._json(200, {"branches": [{"name": n, "ref": f"refs/heads/{n}", "targetCommit": sha} for n, sha in named.items()],
                         "tags": [], "converts": []})

    def _model_info(self, repo_id: str, revision: str) -> None:
        """Model info at ``revision``, every file's size, blob id and LFS sha256 (``files_metadata``) included."""
        if repo_id not in self.hub.repos or self._hidden(repo_id):
            return self._send(404, b"{}", {"X-Error-Code": "RepoNotFound"})
        if repo_id in self.hub.gated:
            return self._send(403, b'{"error": "Access to this repo is restricted"}',
                              {"X-Error-Code": "GatedRepo", "X-Error-Message": "Access is restricted"})
        state = self.hub.state(repo_id, revision)
        if state is None:
            return self._send(404, b"{}", {"X-Error-Code": "RevisionNotFound"})
        listed = {name: self.hub.listed_sizes.get((repo_id, name), len(data)) for name, data in state["files"].items()}
        siblings = [{"rfilename": name, "size": listed[name], "blobId": hashlib.sha1(data).hexdigest(),
                     "lfs": {"sha256": hashlib.sha256(data).hexdigest(), "size": listed[name], "pointerSize": 134}}
                    for name, data in sorted(state["files"].items())]
        self._json(200, {"id": repo_id, "modelId": repo_id, "sha": state["sha"], "private": repo_id in self.hub.private,
                         "siblings": siblings})

    def _resolve(self, head: bool):
        """HEAD or GET of /{repo}/resolve/{revision}/{file}: ETag, X-Repo-Commit, Content-Length, and the bytes."""
        if head:
            self.hub.requests.append(f"HEAD {self.path}")
        match = re.fullmatch(r"/([^/]+/[^/]+|[^/]+)/resolve/([^/]+)/(.+)", urlparse(self.path).path)
        if not match:
            return self._send(404, b"not found", {"X-Error-Code": "EntryNotFound"}, head)
        if match.group(1) not in self.hub.repos or self._hidden(match.group(1)):
            return self._send(404, b"", {"X-Error-Code": "RepoNotFound"}, head)
        state = self.hub.state(match.group(1), unquote(match.group(2)))
        if state is None:
            return self._send(404, b"", {"X-Error-Code": "RevisionNotFound"}, head)
        data = state["files"].get(unquote(match.group(3)))
        if data is None:
            return self._send(404, b"", {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": state["sha"]}, head)
        etag = hashlib.sha256(data).hexdigest()
        drip = match.group(1) in self.hub.dripping and not head
        self._send(200, b"" if drip else data, {"X-Repo-Commit": state["sha"], "ETag": f'"{etag}"',
                                                "Content-Length": str(len(data)), "Content-Type": "application/octet-stream"}, head)
        for byte in data if drip else b"":  # one byte every 0.1 s until the client leaves or the server closes
            try:
                if self.hub.closing.wait(0.1):
                    return
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
            except OSError:  # the client left
                return

    # ---- writing: create a repo, upload, commit --------------------------------------------------------------------

    def _refused(self, repo_id: str, create: bool) -> str | None:
        """Why an OAuth token may not create (or commit to) ``repo_id``; None: it may (a personal token may)."""
        scopes = self.hub.scopes.get(self._token() or "")
        if scopes is None:
            return None
        if repo_id.split("/")[0] != self._user():
            return f"An OAuth token writes under its own user only, not {repo_id}"
        if create and not scopes & CREATE_SCOPES:
            return "This OAuth token cannot create repos (scope contribute-repos or manage-repos needed)"
        if not create and not (scopes & WRITE_SCOPES or ("contribute-repos" in scopes and repo_id in self.hub.app_repos)):
            return f"This OAuth token cannot write to {repo_id}"
        return None

    def _create_repo(self, payload: dict) -> None:
        repo_id = f"{payload['organization']}/{payload['name']}" if payload.get("organization") else payload["name"]
        refused = self._refused(repo_id, create=True)
        if refused:
            return self._json(403, {"error": refused})
        if self._token() in self.hub.scopes and repo_id not in self.hub.repos:
            self.hub.app_repos.add(repo_id)
        if repo_id in self.hub.repos:  # the Hub answers 409 (huggingface_hub's exist_ok=True accepts it)
            return self._json(409, {"error": "exists", "url": f"http://{self.headers['Host']}/{repo_id}"})
        self.hub.repos.setdefault(repo_id, {"sha": "0" * 40, "files": {}, "revisions": {}})
        self._json(200, {"url": f"http://{self.headers['Host']}/{repo_id}", "name": repo_id})

    def _preupload(self, files: list[dict]) -> None:
        """Every file is uploaded "regular" (inline in the commit): no LFS or Xet transfer."""
        self._json(200, {"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False} for f in files]})

    def _commit(self, repo_id: str, body: bytes) -> None:
        """A commit of the whole tree: the files before it, with the body's files added and its deletions gone."""
        refused = self._refused(repo_id, create=False)
        if refused:
            return self._json(403, {"error": refused})
        files = dict(self.hub.repos.get(repo_id, {}).get("files", {}))
        for line in body.decode().splitlines():
            item = json.loads(line)
            if item["key"] == "file":
                value = item["value"]
                files[value["path"]] = base64.b64decode(value["content"])
            elif item["key"] in ("deletedFile", "deletedFolder"):
                files.pop(item["value"]["path"], None)
        sha = self.hub.add_repo(repo_id, files, salt=body)
        self.hub.authors.setdefault(repo_id, []).append(self._user())
        url = f"http://{self.headers['Host']}/{repo_id}"
        self._json(200, {"commitUrl": f"{url}/commit/{sha}", "commitOid": sha})

    # ---- signing in: the OpenID provider ---------------------------------------------------------------------------

    def _oauth_get(self, url) -> bool:
        """The provider's GET routes; False when ``url`` is none of them."""
        routes = {"/.well-known/openid-configuration": lambda query: self._json(200, self.hub.openid_configuration()),
                  "/oauth/jwks": lambda query: self._json(200, {"keys": [signing_key().as_dict(private=False)]}),
                  "/oauth/userinfo": self._userinfo, "/oauth/authorize": self._authorize, "/oauth/consent": self._consent}
        if url.path not in routes:
            return False
        routes[url.path]({key: values[0] for key, values in parse_qs(url.query).items()})
        return True

    def _userinfo(self, query: dict) -> None:
        if self._token() not in self.hub.scopes:
            return self._json(401, {"error": "invalid_token"})
        self._json(200, self.hub.claims(self.hub.users[self._token()]))

    def _authorize(self, query: dict) -> None:
        """The consent page: which app asks what of the user signed in to this Hub in this browser."""
        if query.get("client_id") != self.hub.client_id or not query.get("redirect_uri"):
            return self._html(400, "Unknown client, or no redirect_uri.")
        if query.get("response_type") != "code":
            return self._html(400, "Only response_type=code is supported.")
        user = self._browser_user()
        if user is None:
            return self._html(401, "<h1>Sign in to the Hub first</h1>")
        consent = secrets.token_urlsafe(12)
        self.hub.consents[consent] = {**query, "user": user}
        scopes = ", ".join(html.escape(scope) for scope in query.get("scope", "").split())
        self._html(200, f"<h1>Authorize the Space</h1><p id='consent-user'>Signed in as {html.escape(user)}</p>"
                        f"<p>It asks for: {scopes}</p>"
                        f"<a id='authorize' href='/oauth/consent?{urlencode(dict(id=consent, allow=1))}'>Authorize</a> "
                        f"<a id='deny' href='/oauth/consent?{urlencode(dict(id=consent, allow=0))}'>Deny</a>")

    def _consent(self, query: dict) -> None:
        """The user's answer: back to the client's redirect_uri with a one-time code, or with an error."""
        request = self.hub.consents.pop(query.get("id", ""), None)
        if request is None:
            return self._html(400, "No such consent request.")
        back = {"state": request["state"]} if request.get("state") else {}
        if query.get("allow") == "1":
            code = secrets.token_urlsafe(16)
            self.hub.codes[code] = {key: request.get(key) for key in ("user", "client_id", "redirect_uri", "scope", "nonce")}
            back = {"code": code, **back}
        else:
            back = {"error": "access_denied", "error_description": "The user denied access", **back}
        separator = "&" if "?" in request["redirect_uri"] else "?"
        self._redirect(request["redirect_uri"] + separator + urlencode(back))

    def _oauth_token(self, body: bytes) -> None:
        """POST /oauth/token: an authorization code (once, by the client it was issued to, with the same
        redirect_uri) for an access token, and an id token when the scope has ``openid``."""
        hub = self.hub
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
