"""A small HTTP client for the Frenzy API (used by the CLI, the demo and the e2e tests).

It sends an API token, when it has one, from FRENZY_TOKEN, else from ~/.frenzy/credentials (written
by `frenzy login`, mode 0600; a file others may read is refused rather than used).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx

DEFAULT_URL = "http://127.0.0.1:8000"
TOKEN_ENV = "FRENZY_TOKEN"
CREDENTIALS_ENV = "FRENZY_CREDENTIALS"  # another credentials file (tests, several servers)
DEFAULT_CREDENTIALS = Path("~/.frenzy/credentials")


class ApiError(RuntimeError):
    def __init__(self, status: int, detail: str):
        super().__init__(f"{status}: {detail}")
        self.status, self.detail = status, detail


def credentials_path() -> Path:
    return Path(os.environ.get(CREDENTIALS_ENV) or DEFAULT_CREDENTIALS).expanduser()


def read_credentials(path: Path | None = None) -> str | None:
    """The token in the credentials file, None if there is none; ApiError if others may read it."""
    path = path or credentials_path()
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ApiError(0, f"cannot read the credentials file {path} ({exc})") from None
    with os.fdopen(fd) as f:
        mode = os.fstat(f.fileno()).st_mode & 0o777
        if mode & 0o077:
            raise ApiError(0, f"refusing to read {path}: its mode is {mode:o}, so others may read the token in "
                              f"it; run `chmod 600 {path}` (or `frenzy login` again)")
        return json.loads(f.read() or "{}").get("token") or None


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


class Client:
    def __init__(self, url: str | None = None, timeout: float = 30.0, token: str | None = None):
        self.url = (url or os.environ.get("FRENZY_URL") or DEFAULT_URL).rstrip("/")
        self.token_error: ApiError | None = None
        if token is None:
            token = os.environ.get(TOKEN_ENV) or None
        if token is None:
            try:
                token = read_credentials()
            except ApiError as exc:  # raised at the first call, where the CLI reports errors
                self.token_error = exc
        headers = {"Authorization": f"Bearer {token}"} if token else None
        self.http = httpx.Client(base_url=self.url, timeout=timeout, headers=headers)

    def _call(self, method: str, path: str, **kwargs):
        if self.token_error is not None:
            raise self.token_error
        try:
            r = self.http.request(method, path, **kwargs)
        except httpx.ConnectError as exc:
            raise ApiError(0, f"cannot reach the Frenzy server at {self.url} ({exc}); start it with "
                              "`frenzy serve` or set FRENZY_URL") from None
        if r.status_code >= 400:
            try:
                detail = r.json().get("detail", r.text)
            except ValueError:
                detail = r.text
            raise ApiError(r.status_code, str(detail))
        return r.json()

    def submit(self, spec: dict) -> dict:
        return self._call("POST", "/v1/jobs", json=spec)

    def jobs(self, state: str | None = None) -> list[dict]:
        return self._call("GET", "/v1/jobs", params={"state": state} if state else None)

    def job(self, job_id: str) -> dict:
        return self._call("GET", f"/v1/jobs/{job_id}")

    def logs(self, job_id: str, after: int = 0) -> dict:
        return self._call("GET", f"/v1/jobs/{job_id}/logs", params={"after": after})

    def cancel(self, job_id: str) -> dict:
        return self._call("DELETE", f"/v1/jobs/{job_id}")

    def artifacts(self, job_id: str) -> dict:
        return self._call("GET", f"/v1/jobs/{job_id}/artifacts")

    def download(self, job_id: str, path: str, folder: Path) -> Path:
        """Stream one artifact into folder/path (written beside, then renamed: never half a file)."""
        if self.token_error is not None:
            raise self.token_error
        target = (folder / path).resolve()
        if not target.is_relative_to(folder.resolve()):
            raise ApiError(0, f"the server named an artifact outside the download folder: {path}")
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".part")
        with self.http.stream("GET", f"/v1/jobs/{job_id}/artifacts/{path}") as r:
            if r.status_code >= 400:
                r.read()
                raise ApiError(r.status_code, str(r.json().get("detail", r.text)))
            with open(partial, "wb") as out:
                for chunk in r.iter_bytes(1 << 20):
                    out.write(chunk)
        os.replace(partial, target)
        return target

    def cluster(self) -> dict:
        return self._call("GET", "/v1/cluster")

    def plans(self, **params) -> dict:
        return self._call("GET", "/v1/plans", params=params)

    def healthy(self) -> bool:
        try:
            return bool(self._call("GET", "/healthz").get("ok"))
        except ApiError:
            return False
