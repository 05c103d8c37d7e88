"""A real SMTP server on loopback for the e-mail channel's tests (aiosmtpd), with STARTTLS and AUTH.

`tls_pair()` makes a self-signed certificate for 127.0.0.1 (cryptography) and returns the server's
TLS context and a client context that trusts it. `SmtpServer` runs aiosmtpd's threaded controller on a
free port (or the port given, to bring a server up where a refused one was): `require_starttls`,
`login`/`password` (AUTH, only over TLS), and `reply_to_data` (an SMTP reply such as "451 4.3.0 try
again later" instead of accepting). Every accepted message is kept in `messages`, with whether its
session was encrypted and who logged in; every AUTH attempt's login in `logins`.
"""
from __future__ import annotations

import datetime
import ipaddress
import ssl
import tempfile
from dataclasses import dataclass
from email import message_from_bytes, policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult


def tls_pair() -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """(server context, client context trusting it) for a fresh self-signed certificate of 127.0.0.1."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
            .sign(key, hashes.SHA256()))
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    with tempfile.TemporaryDirectory() as folder:  # load_cert_chain reads files only
        cert_file, key_file = Path(folder) / "cert.pem", Path(folder) / "key.pem"
        cert_file.write_bytes(cert_pem)
        key_file.write_bytes(key_pem)
        server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        server.load_cert_chain(cert_file, key_file)
    client = ssl.create_default_context(cadata=cert_pem.decode())
    return server, client


@dataclass
class Received:
    mail_from: str
    rcpt_tos: list[str]
    message: EmailMessage
    encrypted: bool
    login: str | None


class _Controller(Controller):
    def _trigger_server(self) -> None:
        self.port = self.server.sockets[0].getsockname()[1]  # bound to port 0: the one the system chose
        super()._trigger_server()


class SmtpServer:
    def __init__(self, *, tls: ssl.SSLContext | None = None, require_starttls: bool = False, login: str | None = None,
                 password: str | None = None, port: int = 0) -> None:
        self.messages: list[Received] = []
        self.logins: list[str] = []
        self.reply_to_data: str | None = None
        self.credentials = (login, password)
        kwargs: dict[str, Any] = {"tls_context": tls, "require_starttls": require_starttls}
        if login is not None:
            kwargs.update(authenticator=self._authenticate, auth_require_tls=True)
        self.controller = _Controller(self, hostname="127.0.0.1", port=port, server_hostname="smtp.test", **kwargs)

    def _authenticate(self, server: Any, session: Any, envelope: Any, mechanism: str, auth_data: Any) -> AuthResult:
        login = auth_data.login.decode()
        self.logins.append(login)
        return AuthResult(success=(login, auth_data.password.decode()) == self.credentials, handled=False,
                          auth_data=auth_data)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802 - aiosmtpd's hook
        if self.reply_to_data:
            return self.reply_to_data
        login = session.auth_data.login.decode() if session.authenticated else None
        self.messages.append(Received(envelope.mail_from, list(envelope.rcpt_tos),
                                      message_from_bytes(envelope.content, policy=policy.default),
                                      session.ssl is not None, login))
        return "250 2.0.0 Message accepted for delivery"

    @property
    def port(self) -> int:
        return self.controller.port

    def start(self) -> "SmtpServer":
        self.controller.start()
        return self

    def stop(self) -> None:
        self.controller.stop()
