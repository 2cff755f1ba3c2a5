"""A small HTTP client for the Frenzy API (used by the CLI, the demo and the e2e tests).

It sends an API token, when it has one, from FRENZY_TOKEN, else from ~/.frenzy/credentials (written
by `frenzy login`, mode 0600; a file others may read is refused rather than used).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from urllib.parse import quote

import httpx

from frenzy.core.errors import InvalidConfigError
from frenzy.core.safe_read import open_regular, read_descriptor

DEFAULT_URL = "http://127.0.0.1:8000"
MAX_DETAIL_CHARS = 2000  # of a server's error message: a line or two, not a page a server could send
TOKEN_ENV = "FRENZY_TOKEN"
CREDENTIALS_ENV = "FRENZY_CREDENTIALS"  # another credentials file (tests, several servers)
DEFAULT_CREDENTIALS = Path("~/.frenzy/credentials")
# What an HTTP header can carry: printable ASCII without spaces (`frz.<id>.<secret>` always is).
TOKEN_TEXT = re.compile(r"[!-~]{1,512}")
LOGIN_AGAIN = "run `frenzy login` again with the token `frenzy token create` printed"


class ApiError(RuntimeError):
    def __init__(self, status: int, detail: str):
        super().__init__(f"{status}: {detail}")
        self.status, self.detail = status, detail


def credentials_path() -> Path:
    return Path(os.environ.get(CREDENTIALS_ENV) or DEFAULT_CREDENTIALS).expanduser()


def read_credentials(path: Path | None = None) -> str | None:
    """The token in the credentials file, None if there is none; ApiError if others may read it or
    it is not a file `frenzy login` wrote."""
    path = path or credentials_path()
    if not os.path.lexists(path):
        return None
    try:  # no blocking on a FIFO, no following a link someone else may point anywhere
        with open_regular(path, what="the credentials file", follow_links=False) as (fd, _):
            mode = os.fstat(fd).st_mode & 0o777
            if mode & 0o077:
                raise ApiError(0, f"refusing to read {path}: its mode is {mode:o}, so others may read the token "
                                  f"in it; run `chmod 600 {path}` (or `frenzy login` again)")
            raw = read_descriptor(fd, max_bytes=64 * 1024, what=f"the credentials file {path}")
    except InvalidConfigError as exc:
        raise ApiError(0, f"{exc}; {LOGIN_AGAIN}") from None
    try:
        token = json.loads(raw or b"{}").get("token")
    except (ValueError, AttributeError):  # not JSON, or JSON but not an object
        token = False
    if token is not None and not isinstance(token, str):
        raise ApiError(0, f"the credentials file {path} is not one `frenzy login` wrote; {LOGIN_AGAIN}")
    return token or None


def check_token(token: str) -> str:
    """The token, if an Authorization header can carry it; ApiError saying what to do otherwise."""
    if not TOKEN_TEXT.fullmatch(token):
        raise ApiError(0, "the token holds spaces, characters no token has, or too many of them (a token is "
                          f"`frz.<id>.<secret>`, printable ASCII); {LOGIN_AGAIN} or set FRENZY_TOKEN to it")
    return token


def api_path(*parts: str) -> str:
    """'/v1/' and the parts, each one quoted path segment: an id or a name given on the command line
    (`../teams/x`, `a?b`) never addresses another route or adds a query."""
    for part in parts:
        if part in ("", ".", ".."):
            raise ApiError(0, f"'{part}' is not a name or id Frenzy gives; pass one that `frenzy jobs` or "
                              "`frenzy team list` shows")
    return "/v1/" + "/".join(quote(part, safe="") for part in parts)


def write_credentials(token: str, path: Path | None = None) -> Path:
    """Write the token, 0600 in a 0700 folder, replacing the file (never widening or appending)."""
    path = path or credentials_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".part")
    partial.unlink(missing_ok=True)
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"token": token}, f)
    os.replace(partial, path)
    return path


def _bad_url(url: str, exc: Exception) -> ApiError:
    return ApiError(0, f"the server URL {url!r} is not usable ({exc}); pass --url or set FRENZY_URL to one like "
                       f"{DEFAULT_URL}")


class Client:
    def __init__(self, url: str | None = None, timeout: float = 30.0, token: str | None = None):
        self.url = (url or os.environ.get("FRENZY_URL") or DEFAULT_URL).rstrip("/")
        self.setup_error: ApiError | None = None  # what stops every call: credentials, token or URL unusable
        if token is None:
            token = os.environ.get(TOKEN_ENV) or None
        try:  # an error is raised at the first call, where the CLI reports errors
            if token is None:
                token = read_credentials()
            if token is not None:
                check_token(token)
        except ApiError as exc:
            self.setup_error, token = exc, None
        headers = {"Authorization": f"Bearer {token}"} if token else None
        try:
            self.http = httpx.Client(base_url=self.url, timeout=timeout, headers=headers)
        except httpx.InvalidURL as exc:
            self.setup_error = _bad_url(self.url, exc)
            self.http = httpx.Client(timeout=timeout)  # never sends: every call raises setup_error first

    def _call(self, method: str, path: str, answer: str | None = None, many: bool = False, **kwargs):
        """The server's JSON answer; with `answer` (the name of a response model in
        frenzy.control.schemas; `many`: a list of them), checked against it and completed with its
        defaults, so the commands read only what the API promises: other JSON is an ApiError, not a
        failure inside a command."""
        if self.setup_error is not None:
            raise self.setup_error
        r = self._send(method, path, **kwargs)
        if r.status_code >= 400:
            raise ApiError(r.status_code, _error_detail(r))
        try:
            body = r.json()
        except ValueError:
            raise ApiError(0, f"{self.url} answered {method} {path} with something other than JSON; check that "
                              "FRENZY_URL (or --url) names a Frenzy server") from None
        return body if answer is None else self._checked(body, answer, many, method, path)

    def _checked(self, body, answer: str, many: bool, method: str, path: str):
        from pydantic import TypeAdapter, ValidationError

        from frenzy.control import schemas

        model = getattr(schemas, answer)
        adapter = TypeAdapter(list[model] if many else model)
        try:
            return adapter.dump_python(adapter.validate_python(body), mode="json")
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "the answer"
            what = f"{answer} list" if many else answer
            raise ApiError(0, f"{self.url} answered {method} {path} with JSON that is not a Frenzy {what} "
                              f"({where}: {first['msg']}); check that FRENZY_URL (or --url) names a Frenzy "
                              "server of this version") from None

    def _send(self, method: str, path: str, **kwargs) -> httpx.Response:
        try:
            return self.http.request(method, path, **kwargs)
        except httpx.ConnectError as exc:
            raise ApiError(0, f"cannot reach the Frenzy server at {self.url} ({exc}); start it with "
                              "`frenzy serve` or set FRENZY_URL") from None
        except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
            raise _bad_url(self.url, exc) from None
        except httpx.HTTPError as exc:  # a timeout, a dropped connection, a reply that is not HTTP
            raise ApiError(0, f"no answer from the Frenzy server at {self.url} ({type(exc).__name__}: {exc}); "
                              "check that it runs (`frenzy serve`) and that FRENZY_URL names it") from None

    def submit(self, spec: dict) -> dict:
        return self._call("POST", "/v1/jobs", "JobCreated", json=spec)

    def jobs(self, state: str | None = None) -> list[dict]:
        return self._call("GET", "/v1/jobs", "JobSummary", many=True, params={"state": state} if state else None)

    def job(self, job_id: str) -> dict:
        return self._call("GET", api_path("jobs", job_id), "JobDetail")

    def logs(self, job_id: str, after: int = 0) -> dict:
        return self._call("GET", api_path("jobs", job_id, "logs"), "LogsOut", params={"after": after})

    def cancel(self, job_id: str) -> dict:
        return self._call("DELETE", api_path("jobs", job_id), "JobSummary")

    def artifacts(self, job_id: str) -> dict:
        return self._call("GET", api_path("jobs", job_id, "artifacts"), "ArtifactsOut")

    def download(self, job_id: str, path: str, folder: Path) -> Path:
        """Stream one artifact into folder/path (written beside, then renamed: never half a file)."""
        if self.setup_error is not None:
            raise self.setup_error
        target = (folder / path).resolve()
        if not target.is_relative_to(folder.resolve()):
            raise ApiError(0, f"the server named an artifact outside the download folder: {path}")
        url = api_path("jobs", job_id, "artifacts", *path.split("/"))
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".part")
        try:
            with self.http.stream("GET", url) as r:
                if r.status_code >= 400:
                    r.read()
                    raise ApiError(r.status_code, _error_detail(r))
                with open(partial, "wb") as out:
                    for chunk in r.iter_bytes(1 << 20):
                        out.write(chunk)
        except httpx.HTTPError as exc:
            partial.unlink(missing_ok=True)
            raise ApiError(0, f"the download of {path} from {self.url} broke off ({type(exc).__name__}: {exc}); "
                              "run the command again") from None
        os.replace(partial, target)
        return target

    def cluster(self) -> dict:
        return self._call("GET", "/v1/cluster", "ClusterOut")

    def plans(self, **params) -> dict:
        return self._call("GET", "/v1/plans", "PlansOut", params=params)

    def healthy(self) -> bool:
        try:
            answer = self._call("GET", "/healthz")
            return isinstance(answer, dict) and answer.get("ok") is True
        except ApiError:
            return False


def _error_detail(r: httpx.Response) -> str:
    """The API's `detail` of an error answer, or its text when it is not the API's error shape."""
    try:
        body = r.json()
    except ValueError:
        body = None
    detail = body.get("detail") if isinstance(body, dict) else None
    return str(detail if detail is not None else r.text)[:MAX_DETAIL_CHARS]
