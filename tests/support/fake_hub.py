"""A small Hugging Face Hub on 127.0.0.1, speaking the parts of the HTTP API that huggingface_hub 2.4 uses:

- reading: model info, refs (``list_repo_refs``), (``/api/models/{repo}`` and ``/revision/{rev}``, with
  ``files_metadata``: sizes, blob ids, LFS sha256), HEAD/GET on resolve URLs by branch, tag or commit (ETag, X-Repo-Commit, Content-Length), so
  ``from_pretrained``, ``hf_hub_download`` and ``HfApi.model_info`` run their real code;
- writing (``push_to_hub``, ``upload_folder``, ``ModelCard.push_to_hub``): whoami, create_repo, validate-yaml, preupload,
  commit with the files inline (the server answers "regular" upload mode, so no LFS/Xet transfer);
- signing in: an OpenID Connect provider as huggingface.co is one to a Space with ``hf_oauth: true`` (Gradio's
  ``gr.LoginButton`` runs authlib's client against it when OPENID_PROVIDER_URL is ``url``): the discovery document
  ``/.well-known/openid-configuration``, ``/oauth/authorize`` (the consent page of whoever is signed in to this Hub in
  that browser, ``login_cookie(user)``; "Authorize" sends the browser back to ``redirect_uri`` with a one-time code
  and the client's ``state``, "Deny" with ``error=access_denied``), ``/oauth/token`` (the code, the client's id and
  secret and the same ``redirect_uri`` for a new access token of that user, with the granted scopes, and an
  ``id_token``: a JWT with the ``nonce``, signed RS256 by ``fake_hub_handler.signing_key()``), ``/oauth/jwks`` (its
  public half) and ``/oauth/userinfo``.

Repos live in memory: ``repos[repo_id]`` holds the default branch (``sha``, ``files``) and ``revisions[name]`` every
branch or tag (``add_repo``/``add_folder`` fill them). ``users`` maps a token to its user name (``whoami``); a commit
records who made it in ``authors``. Every request is logged in ``requests`` (what the client really did).
A token from the OAuth flow is in ``users`` too, and its scopes in ``scopes``: as on the Hub, it creates a repo only
under its own user and with ``contribute-repos`` or ``manage-repos``, and commits only with ``write-repos``,
``manage-repos``, or ``contribute-repos`` to a repo it created (``app_repos``); a personal token (not in ``scopes``)
may do anything. The OAuth client is ``client_id``/``client_secret``; ``grants`` lists (user, scope) per token issued.
A repo in ``hanging`` never answers; one in ``dripping`` sends its files' bytes one every 0.1 s; ``HangingHub`` is a
server that takes connections and never answers. A repo in ``private`` answers only its owner's token (anyone else:
404, as the Hub); ``listed_sizes[(repo_id, filename)]`` is the size model info gives for a file (a listing that lies:
the file itself is served whole). ``tokens_seen`` lists the token of every request (None: none sent).

This module holds the Hub's state; fake_hub_handler.py answers the HTTP requests from it."""

import hashlib
import socket
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

from support.fake_hub_handler import LOGIN_COOKIE, HubHandler


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
        self.dripping: set[str] = set()  # repo ids whose files come one byte every 0.1 s
        self.private: set[str] = set()  # repo ids only their owner's token sees
        self.listed_sizes: dict[tuple[str, str], int] = {}  # (repo_id, filename) -> the size model info says
        self.tokens_seen: list[str | None] = []  # the token each request carried
        self.closing = threading.Event()
        # the OpenID provider: one registered client (the Space), its pending consents and one-time codes
        self.client_id, self.client_secret = "fake-space-client-id", "fake-space-client-secret"
        self.scopes: dict[str, set[str]] = {}  # OAuth access token -> the scopes granted
        self.grants: list[tuple[str, str]] = []  # (user, scope) of each access token issued
        self.app_repos: set[str] = set()  # repos created with an OAuth token (contribute-repos reaches these)
        self.consents: dict[str, dict] = {}  # consent id -> the authorize request waiting for the user's answer
        self.codes: dict[str, dict] = {}  # authorization code -> {user, client_id, redirect_uri, scope, nonce}
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), HubHandler)
        self.server.hub = self  # what each request's handler reads and writes
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
