"""`frenzy artifacts ID [--download DIR]`: what a job handed back, and a copy of it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from frenzy.cli.serve import Url, _call, _client, console


def artifacts(job_id: str,
              download: Annotated[Optional[Path], typer.Option(
                  help="copy every file into this folder (load it with transformers / peft from there)")] = None,
              url: Url = None) -> None:
    """List a job's artifacts (peft adapter or save_pretrained model, tokenizer, frenzy_job.json)."""
    client = _client(url)
    out = _call(client.artifacts, job_id)
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
    if not out["ready"]:
        typer.secho("error: the artifacts are still being written; try again when the job has succeeded",
                    fg=typer.colors.RED, err=True)
        raise typer.Exit(2)
    for f in out["files"]:
        _call(client.download, job_id, f["path"], download)
    console.print(f"downloaded {len(out['files'])} files ({out['total_bytes']:,} bytes) into {download}")


def register(app: typer.Typer) -> None:
    app.command()(artifacts)
