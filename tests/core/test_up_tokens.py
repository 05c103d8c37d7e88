"""`driftline up`'s admin token: a fresh random one per run, never the published default; a webhook of the
user's own never receives it."""
from __future__ import annotations

import pytest

from driftline.commands.up import component_env
from driftline.config import DEFAULT_RETRAIN_TOKEN, load_settings

WORKER_URL = "http://127.0.0.1:8000"


@pytest.fixture(autouse=True)
def _no_token_in_the_environment(monkeypatch):
    for name in ("DRIFTLINE_RETRAIN_TOKEN", "DRIFTLINE_RETRAIN_WEBHOOK_URL", "DRIFTLINE_RETRAIN_WEBHOOK_TOKEN",
                 "DRIFTLINE_CONFIG"):
        monkeypatch.delenv(name, raising=False)


def test_each_run_gets_a_random_admin_token_that_its_retrain_webhook_uses(tmp_path):
    settings = load_settings(home=str(tmp_path))
    first, second = (component_env(settings, 15, WORKER_URL) for _ in range(2))
    token = first["DRIFTLINE_RETRAIN_TOKEN"]
    assert token != DEFAULT_RETRAIN_TOKEN and len(token) >= 32
    assert second["DRIFTLINE_RETRAIN_TOKEN"] != token
    assert first["DRIFTLINE_RETRAIN_WEBHOOK_URL"] == f"{WORKER_URL}/admin/retrain"
    assert first["DRIFTLINE_RETRAIN_WEBHOOK_TOKEN"] == token  # the bundled worker is the webhook's receiver


def test_a_token_of_the_users_own_is_kept_and_their_own_webhook_never_gets_it(tmp_path):
    settings = load_settings(home=str(tmp_path), retrain_token="my-own-admin-secret",
                             retrain_webhook_url="https://ml.example/retrain")
    env = component_env(settings, 15, WORKER_URL)
    assert env["DRIFTLINE_RETRAIN_TOKEN"] == "my-own-admin-secret"
    assert env["DRIFTLINE_RETRAIN_WEBHOOK_URL"] == "https://ml.example/retrain"
    assert "DRIFTLINE_RETRAIN_WEBHOOK_TOKEN" not in env
