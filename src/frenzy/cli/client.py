"""A small HTTP client for the Frenzy API (used by the CLI, the demo and the e2e tests)."""

from __future__ import annotations

import os
from pathlib import Path

import httpx

DEFAULT_URL = "http://127.0.0.1:8000"


class ApiError(RuntimeError):
    def __init__(self, status: int, detail: str):
        super().__init__(f"{status}: {detail}")
        self.status, self.detail = status, detail


class Client:
    def __init__(self, url: str | None = None, timeout: float = 30.0):
        self.url = (url or os.environ.get("FRENZY_URL") or DEFAULT_URL).rstrip("/")
        self.http = httpx.Client(base_url=self.url, timeout=timeout)

    def _call(self, method: str, path: str, **kwargs):
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
