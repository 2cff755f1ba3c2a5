"""`frenzy artifacts ID [--download DIR]`: what a job handed back, and a copy of it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from frenzy.cli.output import Json, console, emit, fail
from frenzy.cli.serve import Url, _call, _client


def artifacts(job_id: str,
              download: Annotated[Optional[Path], typer.Option(
                  help="copy every file into this folder (load it with transformers / peft from there)")] = None,
              as_json: Json = False, url: Url = None) -> None:
    """List a job's artifacts (peft adapter or save_pretrained model, tokenizer, frenzy_job.json).

    --json: GET /v1/jobs/ID/artifacts's answer, with "downloaded" (the local paths) after --download."""
    client = _client(url)
    out = _call(client.artifacts, job_id)
    if as_json:
        if download is not None:
            out["downloaded"] = [str(p) for p in _download(client, job_id, out, download)]
        emit(out)
        return
    if not out["files"]:
        console.print(f"{job_id} ({out['state']}) has no artifacts yet: they are written when training ends")
        raise typer.Exit(1 if out["state"] in ("failed", "cancelled") else 0)
    table = Table("file", "bytes", title=f"{job_id} artifacts ({out['state']}"
                  + ("" if out["ready"] else ", still being written") + ")")
    for f in out["files"]:
        table.add_row(f["path"], f"{f['bytes']:,}")
    console.print(table)
    if download is None:
        return
    _download(client, job_id, out, download)
    console.print(f"downloaded {len(out['files'])} files ({out['total_bytes']:,} bytes) into {download}")


def _download(client, job_id: str, listing: dict, folder: Path) -> list[Path]:
    if not listing["ready"]:
        raise fail("the artifacts are still being written", "try again when the job has succeeded")
    try:
        return [_call(client.download, job_id, f["path"], folder) for f in listing["files"]]
    except OSError as exc:
        raise fail(f"cannot write into {folder} ({exc.strerror or exc})", "choose a folder you can write to") from None


def register(app: typer.Typer) -> None:
    app.command()(artifacts)
