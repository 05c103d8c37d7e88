"""`driftline rollout`: shadow, canary, ab, clear and status, with clear one-line errors; `status --json` lists rollouts."""
from __future__ import annotations

import contextlib
import io
import json

import pytest

from driftline.cli import main
from driftline.store import db as store_db
from driftline.store.aliases import move_alias
from driftline.store.models import ModelVersion
from driftline.store.rollouts import record_verdict

MODEL = "credit"


@pytest.fixture
def store(sqlite_url) -> str:
    with store_db.session_scope(sqlite_url) as s:
        for version in ("3", "4", "5"):
            s.add(ModelVersion(model=MODEL, version=version))
        s.flush()
        move_alias(s, MODEL, "3", "promote", None)
    return sqlite_url


def driftline(store: str, *args: str) -> tuple[int, str, str]:
    """Run the command line in this process, as `driftline ARGS --db STORE`: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main([*args, "--db", store])
        except SystemExit as exc:
            code = exc.code or 0
    return code, out.getvalue(), err.getvalue()


def test_shadow_canary_ab_clear_and_status(store):
    assert driftline(store, "rollout", "shadow", "--model", MODEL, "--version", "4", "--share", "0.5")[0] == 0
    code, out, _ = driftline(store, "rollout", "canary", "--model", MODEL, "--version", "4", "--weight", "5",
                             "--reason", "looks fine in shadow")
    assert code == 0 and "canary of version 4 at 5%" in out and "was: shadow" in out
    code, out, _ = driftline(store, "rollout", "status", "--json")
    [entry] = json.loads(out)
    assert (entry["mode"], entry["candidate"], entry["verdict"], len(entry["steps"])) == ("canary", "4", None, 2)
    assert entry["steps"][1]["reason"] == "looks fine in shadow"

    assert driftline(store, "rollout", "ab", "--model", MODEL, "--arms", "3:50,4:25,5:25")[0] == 0
    code, out, _ = driftline(store, "status", "--json")
    [entry] = json.loads(out)["rollouts"]
    assert (entry["model"], entry["mode"], entry["candidate"]) == (MODEL, "ab", "3,4,5")
    assert [step["to"]["mode"] for step in entry["steps"]] == ["shadow", "canary", "ab"]
    code, out, _ = driftline(store, "status")
    assert code == 0 and "rollouts: 1" in out and "A/B test version 3 50%, version 4 25%, version 5 25%" in out
    with store_db.session_scope(store) as s:  # the analysis judged a window: version 5 is better than the control
        record_verdict(s, MODEL, "3,4,5", 0, 60_000, "pass", ["A/B test: version 5 is better"], {"winner": "5"})
    code, out, _ = driftline(store, "rollout", "status")
    assert code == 0 and "verdict pass, A/B winner version 5" in out and "- A/B test: version 5 is better" in out
    [entry] = json.loads(driftline(store, "rollout", "status", "--json")[1])
    assert (entry["verdict"], entry["winner"], entry["reasons"]) == ("pass", "5", ["A/B test: version 5 is better"])

    code, out, _ = driftline(store, "rollout", "clear", "--model", MODEL)
    assert code == 0 and "production only" in out
    ended = json.loads(driftline(store, "status", "--json")[1])["rollouts"]  # ended: still shown, as cleared
    assert [(r["mode"], r["candidate"], r["outcome"], r["verdict"]) for r in ended] == [("ab", "3,4,5", "cleared",
                                                                                           "pass")]
    out = driftline(store, "rollout", "status")[1]
    assert "no rollouts" in out and "ab of version 3,4,5 ended" in out and "cleared by cli" in out


@pytest.mark.parametrize("args, message", [
    (["canary", "--model", MODEL, "--version", "3", "--weight", "5"], "production version"),
    (["canary", "--model", MODEL, "--version", "9", "--weight", "5"], "has no version '9' (registered: 3, 4, 5)"),
    (["canary", "--model", MODEL, "--version", "4", "--weight", "0"], "(0, 100]"),
    (["canary", "--model", MODEL, "--version", "4", "--weight", "150"], "(0, 100]"),
    (["shadow", "--model", MODEL, "--version", "4", "--share", "2"], "(0, 1]"),
    (["ab", "--model", MODEL, "--arms", "3:50,4:40"], "sum to 100"),
    (["ab", "--model", MODEL, "--arms", "3-50"], "VERSION:WEIGHT"),
    (["canary", "--model", "nobody", "--version", "4", "--weight", "5"], "no production version"),
])
def test_bad_rollouts_are_one_line_errors(store, args, message):
    code, out, err = driftline(store, "rollout", *args)
    assert code == 1, (out, err)
    assert err.startswith("driftline: error:") and message in err and "Traceback" not in err
    assert json.loads(driftline(store, "status", "--json")[1])["rollouts"] == []
