"""Who may see the dashboard: the sign-on policy as pure decisions (no Streamlit, no I/O).

The identity comes from an OpenID Connect ID token (`st.user`, mode ``oidc``) or from an
authenticating reverse proxy's headers (mode ``proxy``, oauth2-proxy style), and the headers are
believed only when the connection's peer is one of the configured proxy addresses: anyone who can
reach the dashboard directly could send them otherwise. A user is allowed when their (verified)
e-mail address is listed, its domain is, or one of their groups is. The Report page, which shows
sampled feature values, additionally needs membership of the report group.
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from driftline.config import Settings, secret
from driftline.errors import UserError
from driftline.hosts import is_loopback

NONE, OIDC, PROXY = "none", "oidc", "proxy"
# A peer address the server does not know; Streamlit reports loopback peers as None (st.context.ip_address).
LOOPBACK_PEER = "127.0.0.1"
# A proxy's groups header may list many groups: only the first MAX_GROUPS are read; a longer header is ignored.
MAX_GROUPS = 500
MAX_HEADER_CHARS = 8192


def split_list(value: str) -> tuple[str, ...]:
    """A comma-separated setting as its non-empty items, trimmed."""
    return tuple(item.strip() for item in value.split(",") if item.strip())


@dataclass(frozen=True)
class Identity:
    """A signed-in user as the dashboard sees them (never a token)."""

    email: str
    subject: str = ""
    groups: frozenset[str] = frozenset()
    email_verified: bool = True
    source: str = OIDC


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str


@dataclass(frozen=True)
class AccessPolicy:
    """The sign-on settings, parsed once."""

    mode: str = NONE
    domains: frozenset[str] = frozenset()
    users: frozenset[str] = frozenset()
    groups: frozenset[str] = frozenset()
    groups_claim: str = "groups"
    proxies: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()
    email_header: str = "X-Forwarded-Email"
    groups_header: str = "X-Forwarded-Groups"
    report: bool = True
    report_group: str = ""
    trust_unverified_email: bool = False

    @classmethod
    def from_settings(cls, settings: Settings) -> AccessPolicy:
        return cls(mode=settings.dashboard_auth,
                   domains=frozenset(d.lower().lstrip("@") for d in split_list(settings.dashboard_allowed_domains)),
                   users=frozenset(u.lower() for u in split_list(settings.dashboard_allowed_users)),
                   groups=frozenset(split_list(settings.dashboard_allowed_groups)),
                   groups_claim=settings.dashboard_groups_claim.strip() or "groups",
                   proxies=parse_networks(settings.dashboard_proxy_addresses),
                   email_header=settings.dashboard_proxy_email_header.strip(),
                   groups_header=settings.dashboard_proxy_groups_header.strip(),
                   report=settings.dashboard_report, report_group=settings.dashboard_report_group.strip(),
                   trust_unverified_email=settings.dashboard_trust_unverified_email)

    @property
    def signs_in(self) -> bool:
        return self.mode != NONE

    def decide(self, identity: Identity) -> Decision:
        """Whether `identity` may see the dashboard, and why (the words the refusal page shows)."""
        email = identity.email.strip().lower()
        in_group = sorted(self.groups & identity.groups)
        if in_group:
            return Decision(True, f"member of {in_group[0]}")
        if email and (identity.email_verified or self.trust_unverified_email):
            if email in self.users:
                return Decision(True, "listed user")
            domain = email.rpartition("@")[2]
            if "@" in email and domain in self.domains:
                return Decision(True, f"domain {domain}")
        elif email:
            return Decision(False, f"the provider has not verified {identity.email} (its ID token does not say "
                                   "email_verified: true), and only a verified e-mail counts for the allowed users "
                                   "and domains")
        return Decision(False, f"{identity.email or identity.subject or 'this account'} is not among the allowed "
                               "users, domains or groups")

    def may_see_report(self, identity: Identity | None) -> bool:
        """The Report page (sampled feature values): off, or only for the report group when users sign in."""
        if not self.report:
            return False
        if not self.signs_in:
            return True
        return bool(identity is not None and self.report_group and self.report_group in identity.groups)

    def trusts_peer(self, peer: str | None) -> bool:
        """Whether a connection from `peer` (None: loopback, as Streamlit reports it) comes from a proxy."""
        try:
            address = ipaddress.ip_address((peer or LOOPBACK_PEER).strip().strip("[]"))
        except ValueError:
            return False
        return any(address in network for network in self.proxies)

    def identity_from_claims(self, claims: Mapping[str, Any]) -> Identity:
        """The identity in an ID token's claims (`st.user`); groups from `groups_claim` (a list or a string)."""
        return Identity(email=str(claims.get("email") or ""), subject=str(claims.get("sub") or ""),
                        groups=frozenset(_groups(claims.get(self.groups_claim))),
                        email_verified=is_verified(claims.get("email_verified")), source=OIDC)

    def identity_from_headers(self, headers: Mapping[str, str], peer: str | None) -> Identity | None:
        """The proxy's user, or None when the request did not come through a proxy or names nobody."""
        if not self.trusts_peer(peer):
            return None
        email = _header(headers, self.email_header)
        if not email:
            return None
        return Identity(email=email, groups=frozenset(_groups(_header(headers, self.groups_header))), source=PROXY)


def is_verified(value: Any) -> bool:
    """An ID token's `email_verified`: only true (or "true", any case) verifies; absent, 0 or "no" do not (nOAuth:
    a provider whose users edit their own e-mail would otherwise let anyone claim an allowed address)."""
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


def single_values(headers: Mapping[str, list[str]]) -> dict[str, str]:
    """Each header's value; a header sent more than once counts as absent: a proxy that appends its header
    to one the client sent would otherwise let the client's come first."""
    return {name: values[0] if len(values) == 1 else "" for name, values in headers.items()}


def _header(headers: Mapping[str, str], name: str) -> str:
    wanted = name.lower()
    for key, value in headers.items():
        if key.lower() == wanted:
            value = str(value).strip()
            return value if len(value) <= MAX_HEADER_CHARS else ""
    return ""


def _groups(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        items: list[Any] = value.split(",")
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        return ()
    return [str(g).strip() for g in items[:MAX_GROUPS] if str(g).strip()]


def parse_networks(value: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    """Comma-separated addresses or CIDR networks ("10.0.0.5, 10.1.0.0/16, ::1")."""
    networks = []
    for item in split_list(value):
        try:
            networks.append(ipaddress.ip_network(item.strip("[]"), strict=False))
        except ValueError:
            raise UserError(f"dashboard_proxy_addresses: {item!r} is not an IP address or network "
                            "(names are not accepted: the check is on the connection's address)") from None
    return tuple(networks)


def check_settings(settings: Settings, host: str) -> list[str]:
    """A `UserError` for sign-on settings the dashboard cannot start with; returns notes worth printing."""
    policy = AccessPolicy.from_settings(settings)
    notes: list[str] = []
    if not policy.signs_in:
        if not is_loopback(host):
            raise UserError(f"the dashboard would listen on {host}, reachable from other machines, without a login: "
                            "set dashboard_auth to oidc (DRIFTLINE_DASHBOARD_AUTH=oidc, with the provider's "
                            "dashboard_oidc_* settings) or proxy (behind an authenticating proxy, with "
                            "dashboard_proxy_addresses), or serve on 127.0.0.1")
        return notes
    if not (policy.domains or policy.users or policy.groups):
        raise UserError(f"dashboard_auth is {policy.mode} but nobody is allowed in: set dashboard_allowed_domains, "
                        "dashboard_allowed_users or dashboard_allowed_groups")
    if policy.mode == OIDC:
        missing = [name for name in ("dashboard_oidc_metadata_url", "dashboard_oidc_client_id",
                                     "dashboard_oidc_client_secret") if not secret(getattr(settings, name))]
        if missing:
            raise UserError(f"dashboard_auth is oidc but {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} "
                            "not set (the provider's discovery URL and the client registered there)")
        for name in ("dashboard_oidc_metadata_url", "dashboard_oidc_redirect_uri"):
            value = getattr(settings, name)
            if value and not value.startswith(("https://", "http://")):
                raise UserError(f"{name} must be an http(s) URL, got {value!r}")
        if settings.dashboard_oidc_cookie_secret is None:
            notes.append("dashboard_oidc_cookie_secret is not set: a random one is used, so a restart logs "
                         "everyone out")
    if policy.mode == PROXY:
        if not policy.proxies:
            raise UserError("dashboard_auth is proxy but dashboard_proxy_addresses is empty: list the proxy's "
                            "addresses, the only ones whose identity headers are believed")
        if not policy.email_header:
            raise UserError("dashboard_proxy_email_header is empty: name the header that carries the user's e-mail")
    if policy.mode == OIDC and policy.trust_unverified_email and (policy.users or policy.domains):
        notes.append("dashboard_trust_unverified_email is true: an e-mail the provider has not verified counts for "
                     "dashboard_allowed_users and _domains, so anyone who can set that address at the provider gets in")
    if policy.report and not policy.report_group:
        notes.append("the Report page (sampled feature values) is shown to nobody: set dashboard_report_group "
                     "to the group that may see it, or dashboard_report = false to say so")
    return notes
