"""Ray token authentication as `frenzy serve` sets it up: on unless the operator turns it off, and
off only for Frenzy's own loopback fake cluster; the token Frenzy generates is private."""

from __future__ import annotations

import os
import stat
import sys

import pytest

from frenzy.executor import ray_env

RAY_VARIABLES = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "GLOO_SOCKET_IFNAME",
                 "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")


@pytest.fixture
def env(monkeypatch, tmp_path):
    """configure() sets process-wide variables (and re-reads Ray's cached config when Ray is loaded):
    both are put back afterwards, so no other test sees them."""
    saved = dict(os.environ)
    monkeypatch.delitem(sys.modules, "ray._raylet", raising=False)
    for name in RAY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(ray_env, "DEFAULT_TOKEN_PATH", tmp_path / ".frenzy" / "ray_auth_token")
    yield tmp_path
    os.environ.clear()
    os.environ.update(saved)


def test_token_auth_is_the_default_with_a_private_generated_token(env):
    assert ray_env.configure(fake_cluster=False) == "token"
    token = env / ".frenzy" / "ray_auth_token"
    assert os.environ["RAY_AUTH_MODE"] == "token" and os.environ["RAY_AUTH_TOKEN_PATH"] == str(token)
    assert stat.S_IMODE(token.stat().st_mode) == 0o600 and stat.S_IMODE(token.parent.stat().st_mode) == 0o700
    assert len(token.read_text()) == 64  # 32 random bytes, hex
    first = token.read_text()
    ray_env.configure(fake_cluster=False)
    assert token.read_text() == first  # generated once: every node and the server share it


def test_an_operators_token_is_used_as_given(env, monkeypatch):
    monkeypatch.setenv("RAY_AUTH_TOKEN", "operator-secret")
    assert ray_env.configure(fake_cluster=False) == "token"
    assert not (env / ".frenzy" / "ray_auth_token").exists()


def test_auth_is_off_only_for_the_loopback_fake_cluster(env, monkeypatch):
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    with pytest.raises(ray_env.RayAuthError, match="open to anyone"):
        ray_env.configure(fake_cluster=False)
    assert ray_env.configure(fake_cluster=True) == "disabled"
    assert os.environ["GLOO_SOCKET_IFNAME"] == "lo"  # the fake cluster's workers stay on loopback
    monkeypatch.setenv("RAY_AUTH_MODE", "k8s")
    with pytest.raises(ray_env.RayAuthError, match="not supported"):
        ray_env.configure(fake_cluster=True)
