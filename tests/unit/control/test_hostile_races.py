"""Team writes racing on one team (real SQLite store, real threads): each write answers with what it
wrote. Before, PUT read the team back after committing, so a DELETE in between made a successful
PUT answer 404 (and another PUT in between made it answer that request's quota)."""

from __future__ import annotations

import threading

from frenzy.control.store import SqlJobStore
from frenzy.control.teams import UnknownTeamError


def test_a_team_write_answers_with_what_it_wrote_while_others_delete_and_rewrite(tmp_path):
    store = SqlJobStore(f"sqlite:///{tmp_path / 'f.db'}")
    wrong, errors, start = [], [], threading.Barrier(6)

    def writer(gpus: int):
        start.wait()
        for _ in range(60):
            try:
                team = store.set_team("vision", {"A10G-24G": gpus}, now=0.0)
            except Exception as exc:  # noqa: BLE001 - any failure of a write that should succeed is the bug
                errors.append(repr(exc))
                continue
            if team.quota != {"A10G-24G": gpus}:
                wrong.append((gpus, team.quota))

    def deleter():
        start.wait()
        for _ in range(120):
            try:
                store.delete_team("vision")
            except UnknownTeamError:
                pass

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(1, 5)] + \
              [threading.Thread(target=deleter) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == [] and wrong == [], (errors[:3], wrong[:3])
