"""The dashboard's sign-on gate: every page run passes `gate()` before it reads the store.

Mode ``none`` serves loopback peers only. Mode ``oidc`` shows a login page until Streamlit's
`st.login` has a signed-in user (`st.user`, the ID token's claims), mode ``proxy`` reads the
user from the authenticating proxy's headers (`st.context.headers`) when the connection comes
from a proxy address (`st.context.ip_address`, the TCP peer; None for loopback). Either way the
policy (driftline.dashboard.access) decides, and a refused user gets a page that says why and
shows no data. Each login is logged once, with who and when, never a token.
"""
from __future__ import annotations

import logging
import sys
import threading
from collections import OrderedDict
from datetime import datetime, timezone
from typing import Any

import streamlit as st

from driftline.dashboard.access import NONE, OIDC, AccessPolicy, Decision, Identity, single_values

log = logging.getLogger("driftline.dashboard.signon")
IDENTITY_KEY = "_driftline_identity"  # this session's signed-in user (server-side session state, no widget)
_LOGGED_KEY = "_driftline_login_logged"
# ID tokens already logged (subject, issued-at): one line per login, not per page view; bounded.
_LOGGED_TOKENS: OrderedDict[tuple[str, str], None] = OrderedDict()
_LOGGED_LOCK = threading.Lock()
_MAX_LOGGED = 10_000


def _configure_log() -> None:
    """The Streamlit process configures only its own loggers: give driftline's a stderr handler, once."""
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False


_configure_log()


def gate(policy: AccessPolicy) -> Identity | None:
    """The signed-in user allowed to see the dashboard (None: mode none, a loopback visitor); otherwise a page
    that says what to do, and `st.stop()`."""
    if policy.mode == NONE:
        if request()[1] is not None:  # a remote peer reached a dashboard served without a login
            _refuse("This dashboard has no login and answers only on this machine. Serve it with "
                    "`dashboard_auth` set (docs/sign-on.md) to open it from elsewhere.")
        return None
    if policy.mode == OIDC:
        claims = dict(st.user.to_dict())
        if claims.get("is_logged_in") is not True:
            _login_page()
        identity = policy.identity_from_claims(claims)
        login_key = (identity.subject or identity.email, str(claims.get("iat", "")))
    else:
        identity = policy.identity_from_headers(*request())
        if identity is None:
            _refuse("This dashboard is reached through its sign-on proxy, which names the user in "
                    f"`{policy.email_header}`. This request did not come through it.")
        login_key = (identity.email, "")
    decision = policy.decide(identity)
    _record_login(identity, decision, login_key)
    if not decision.allowed:
        st.session_state.pop(IDENTITY_KEY, None)
        _refuse(f"**{identity.email or identity.subject}** may not see this dashboard: {decision.reason}. Ask its "
                "operator to add you to `dashboard_allowed_users`, `_domains` or `_groups`.",
                logout=policy.mode == OIDC)
    st.session_state[IDENTITY_KEY] = identity
    return identity


def request() -> tuple[dict[str, str], str | None]:
    """This session's request headers and TCP peer (None: loopback); what AppTest cannot seed, tests replace."""
    headers, peer = st.context.headers, st.context.ip_address
    # a str, or None for loopback, from a real server; AppTest's stand-in client has neither (no peer: loopback)
    return single_values({name: headers.get_all(name) for name in headers}), peer if isinstance(peer, str) else None


def current_identity() -> Identity | None:
    """The user this session's gate let in (None: no login)."""
    found = st.session_state.get(IDENTITY_KEY)
    return found if isinstance(found, Identity) else None


def sidebar_account(policy: AccessPolicy, identity: Identity | None) -> None:
    if identity is None:
        return
    with st.sidebar:
        st.caption(f"Signed in as **{identity.email or identity.subject}**")
        if policy.mode == OIDC:
            st.button("Log out", on_click=st.logout, icon=":material/logout:")


def _login_page() -> None:
    st.title("driftline")
    st.info("Sign in to see the dashboard.", icon=":material/lock:")
    st.button("Log in", on_click=st.login, type="primary", icon=":material/login:")
    st.stop()


def _refuse(message: str, logout: bool = False) -> None:
    st.title("driftline")
    st.error(message, icon=":material/block:")
    if logout:
        st.button("Log out", on_click=st.logout, icon=":material/logout:")
    st.stop()


def _record_login(identity: Identity, decision: Decision, key: tuple[str, str]) -> None:
    """One log line per login: an ID token (subject, issued-at) once per process, a proxy user once per session."""
    if key[1]:
        with _LOGGED_LOCK:
            if key in _LOGGED_TOKENS:
                return
            _LOGGED_TOKENS[key] = None
            while len(_LOGGED_TOKENS) > _MAX_LOGGED:
                _LOGGED_TOKENS.popitem(last=False)
    elif st.session_state.get(_LOGGED_KEY) == key:
        return
    st.session_state[_LOGGED_KEY] = key
    log.info("%s", login_line(identity, decision, datetime.now(timezone.utc)))


def login_line(identity: Identity, decision: Decision, at: datetime) -> str:
    """The login's log line: who, when, how, and the decision; names and groups only, never a token."""
    who: list[Any] = [identity.email or "(no e-mail)"]
    if identity.subject:
        who.append(f"subject {identity.subject}")
    if identity.groups:
        who.append("groups " + ",".join(sorted(identity.groups)[:20]))
    outcome = "allowed" if decision.allowed else "refused"
    return (f"dashboard login {outcome}: {'; '.join(str(w) for w in who)} via {identity.source} at "
            f"{at.isoformat(timespec='seconds').replace('+00:00', 'Z')} ({decision.reason})")
