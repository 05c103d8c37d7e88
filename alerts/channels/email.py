"""E-mail: one message per group notification over SMTP, with STARTTLS before AUTH (stdlib smtplib).

Settings: `smtp_host` (switches the channel on), `smtp_port` (587, the submission port),
`smtp_username` and `smtp_password` (AUTH, when a username is set), `smtp_from`, `email_to`
(comma-separated) and `smtp_starttls` (true: the session is upgraded with STARTTLS, the server's
certificate verified, before the password is sent; a server that offers no STARTTLS is refused
rather than sent the password in the clear). `smtp_starttls = false` with a username is allowed on
loopback only (a local relay).

The message: `Subject` is the title (line breaks and control characters flattened, so a value
from data cannot add a header), a plain-text part (title, model, version, detector, severity,
window, status, one line per alert with its event-time windows, the dashboard link) and an HTML
alternative of the same, every value HTML-escaped. `Message-ID` is derived from the
notification's idempotency key, so a copy sent again after a crash carries the same id (mail
clients show it once); `Auto-Submitted: auto-generated` keeps vacation responders quiet.

One delivery attempt is bounded as a whole by the channel's timeout, as an HTTP call is
(driftline.alerts.channels.deadline): connecting, the TLS handshake, every command and reply. A
server that trickles its replies is hung up on at the deadline, and the attempt is a retryable
failure. Replies: 2xx/3xx are the conversation; a 4xx reply (greylisting, a full mailbox, "try
again later") and network trouble (refused, reset, timed out, disconnected) are retried; a 5xx
reply (login refused, sender or every recipient rejected) and a server without STARTTLS, or with
a certificate that does not verify, fail at once. Recipients refused while others were accepted
do not fail the message (a retry would send it again to those who got it): the answer lists them.
The password is never stored (added at send time) and never in error text (the channel's secrets
are scrubbed from it).
"""
from __future__ import annotations

import html
from dataclasses import KW_ONLY, dataclass, field
import re
import smtplib
import socket
import ssl
import threading
from email.message import EmailMessage
from email.utils import formatdate, parseaddr
from typing import Any, ClassVar, Mapping

from driftline import defaults
from driftline.config import secret
from driftline.errors import UserError
from driftline.hosts import is_loopback

from driftline.alerts.channels.http import SendResult
from driftline.alerts.messages import detector_label, event_windows_text, format_number

EMAIL = "email"
# Subject lines beyond this are cut: mail clients show the first few dozen characters anyway.
MAX_SUBJECT_CHARS = 200
# SMTP reply classes (RFC 5321 4.2.1): 4yz a transient failure, worth another attempt; 5yz permanent.
TRANSIENT_REPLY = range(400, 500)
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]+")
_KEY_CHARS = re.compile(r"[^A-Za-z0-9.\-]")


def addresses(setting: str | None) -> list[str]:
    """The addresses of a comma-separated setting, stripped; empty parts left out."""
    return [part.strip() for part in (setting or "").split(",") if part.strip()]


def address_problem(value: str) -> str | None:
    """Why `value` is not one plain e-mail address (local@domain), or None."""
    name, address = parseaddr(value)
    if _CONTROL.search(value) or not address or address.count("@") != 1 or not all(address.split("@")):
        return "is not an e-mail address"
    return None


def one_line(text: str) -> str:
    """`text` without line breaks or control characters (a header value must not start another header)."""
    return _CONTROL.sub(" ", str(text)).strip()


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _line(alert: Mapping[str, Any], resolved: bool, reference_ms: int | None) -> str:
    name = alert["feature"] or detector_label(alert["detector"])
    if alert["value"] is None and alert["threshold"] is None and alert.get("summary"):
        text = f"{name}: {alert['summary']}"
    else:
        metric = alert.get("metric") or "value"
        text = (f"{name}: {metric} {format_number(alert['value'])} vs threshold {format_number(alert['threshold'])}"
                + (f" ({detector_label(alert['detector'])})" if alert["feature"] else ""))
    if windows := event_windows_text(alert, reference_ms):
        text += f"; {windows}"
    return one_line(text + ("; resolved" if resolved else ""))


def render_email(message: Mapping[str, Any]) -> dict[str, Any]:
    """Subject, plain text and HTML of a group message (see driftline.alerts.messages); no addresses."""
    alerts = list(message["alerts"])
    window = message["window"]
    detectors = sorted({a["detector"] for a in alerts})
    fields = [("Model", message["model"]), ("Version", message["version"]),
              ("Detector", ", ".join(detector_label(d) for d in detectors) or "n/a"), ("Severity", message["severity"]),
              ("Window", f"{window['start']} → {window['end']}"), ("Status", message["status"])]
    related = list(message.get("related_features") or [])
    lines = [_line(a, message["kind"] == "resolve", window.get("start_ms")) for a in alerts]
    title = one_line(message["title"])
    text = "\n".join([title, "", *(f"{k}: {one_line(v)}" for k, v in fields), "",
                      *([f"Drifted features ({len(related)}): {one_line(', '.join(related))}", ""] if related else []),
                      *(f"- {line}" for line in lines), "", f"Dashboard: {message['dashboard_url']}", ""])
    e = html.escape
    rows = "".join(f"<tr><th align=\"left\">{e(k)}</th><td>{e(one_line(v))}</td></tr>" for k, v in fields)
    body = (f"<h2>{e(title)}</h2><table>{rows}</table>"
            + (f"<p><b>Drifted features ({len(related)}):</b> {e(', '.join(related))}</p>" if related else "")
            + "<ul>" + "".join(f"<li>{e(line)}</li>" for line in lines) + "</ul>"
            + f"<p><a href=\"{e(message['dashboard_url'], quote=True)}\">Open the driftline dashboard</a></p>")
    return {"subject": _cut(title, MAX_SUBJECT_CHARS), "text": text,
            "html": f"<!DOCTYPE html><html><body>{body}</body></html>"}


class _Watchdog:
    """Hangs up an SMTP session's socket when the attempt's deadline passes (a blocked read returns at once)."""

    def __init__(self, client: smtplib.SMTP, seconds: float):
        self.client = client
        self.fired = threading.Event()
        self.timer = threading.Timer(seconds, self._hang_up)
        self.timer.daemon = True

    def _hang_up(self) -> None:
        self.fired.set()
        sock = getattr(self.client, "sock", None)
        if sock is not None:
            try:  # the plain socket's shutdown, also under TLS: SSLSocket's own would drop its state mid-read
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
            except OSError:
                pass

    def __enter__(self) -> "_Watchdog":
        self.timer.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.timer.cancel()


def _reply_text(reply: Any) -> str:
    return reply.decode("utf-8", errors="replace") if isinstance(reply, bytes) else str(reply)


def result_from_smtp_error(exc: BaseException, timeout: float, timed_out: bool, step: str) -> SendResult:
    """Classify what went wrong in one SMTP session (at `step`): 4xx and network trouble are retried, 5xx are not."""
    if timed_out or isinstance(exc, (socket.timeout, TimeoutError)):
        return SendResult(ok=False, error=f"timed out after {timeout:g}s at {step} ({type(exc).__name__})")
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        codes = [code for code, _ in exc.recipients.values()]
        detail = "; ".join(f"{addr}: {code} {_reply_text(reply)}" for addr, (code, reply) in exc.recipients.items())
        return SendResult(ok=False, status=max(codes, default=None), error=f"every recipient refused: {detail}"[:500],
                          retryable=any(code in TRANSIENT_REPLY for code in codes))
    if isinstance(exc, smtplib.SMTPResponseException):
        what = "login refused" if isinstance(exc, smtplib.SMTPAuthenticationError) else "refused"
        return SendResult(ok=False, status=exc.smtp_code,
                          error=f"SMTP {what}: {exc.smtp_code} {_reply_text(exc.smtp_error)}"[:500],
                          retryable=exc.smtp_code in TRANSIENT_REPLY)
    if isinstance(exc, smtplib.SMTPNotSupportedError) and step == "STARTTLS":
        return SendResult(ok=False, error=f"the SMTP server offers no STARTTLS ({exc}): nothing was sent, and no "
                                          "password; use a server that does, or smtp_starttls = false on loopback",
                          retryable=False)
    if isinstance(exc, smtplib.SMTPNotSupportedError):  # no AUTH offered, or no SMTPUTF8 for a non-ASCII address
        return SendResult(ok=False, error=f"the SMTP server does not support what {step} needs: {exc}"[:500],
                          retryable=False)
    if isinstance(exc, ssl.SSLCertVerificationError):
        return SendResult(ok=False, error=f"the SMTP server's certificate does not verify: {exc}"[:500],
                          retryable=False)
    return SendResult(ok=False, error=f"{type(exc).__name__} at {step}: {exc}"[:500])


@dataclass(eq=False)
class EmailChannel:
    """Sends rendered messages through one SMTP server; retries are the outbox's job."""

    name: ClassVar[str] = EMAIL
    title: ClassVar[str] = "E-mail (SMTP)"
    settings: ClassVar[tuple[str, ...]] = ("smtp_host", "smtp_port", "smtp_username", "smtp_password", "smtp_from",
                                           "email_to", "smtp_starttls")
    min_severity: ClassVar[str | None] = "warning"  # an inbox is read later: what needs a look, not every note

    host: str
    port: int
    sender: str
    recipients: list[str]
    _: KW_ONLY
    username: str | None = None
    password: str | None = field(default=None, repr=False)  # never in a repr, a log line or a traceback
    starttls: bool = True
    ssl_context: ssl.SSLContext = field(default_factory=ssl.create_default_context, repr=False)
    timeout: float = defaults.ALERT_HTTP_TIMEOUT_SECONDS

    @classmethod
    def check(cls, settings: Any) -> list[str]:
        if not settings.smtp_from or address_problem(settings.smtp_from):
            raise UserError("smtp_from " + ("is not set" if not settings.smtp_from else "is not an e-mail address")
                            + " (the sender of alert e-mails, e.g. driftline@example.com)")
        recipients = addresses(settings.email_to)
        if not recipients:
            raise UserError("email_to names no address (comma-separated recipients of alert e-mails)")
        for recipient in recipients:
            if address_problem(recipient):
                raise UserError(f"email_to: {recipient!r} is not an e-mail address")
        if settings.smtp_username and not settings.smtp_starttls and not is_loopback(settings.smtp_host):
            raise UserError(f"smtp_starttls is false but {settings.smtp_host} is not loopback: the SMTP password "
                            "would cross the network unencrypted; keep smtp_starttls = true")
        if secret(settings.smtp_password) and not settings.smtp_username:
            return ["smtp_password is set but smtp_username is not: e-mail is sent without logging in"]
        return []

    @classmethod
    def from_settings(cls, settings: Any, timeout: float) -> "EmailChannel":
        return cls(settings.smtp_host, settings.smtp_port, settings.smtp_from or "", addresses(settings.email_to),
                   username=settings.smtp_username, password=secret(settings.smtp_password),
                   starttls=settings.smtp_starttls, timeout=timeout)

    @staticmethod
    def render(message: Mapping[str, Any], idempotency_key: str) -> dict[str, Any]:
        return render_email(message)

    def message(self, payload: Mapping[str, Any], idempotency_key: str) -> EmailMessage:
        mail = EmailMessage()
        mail["Subject"] = one_line(payload.get("subject", ""))
        mail["From"] = self.sender
        mail["To"] = ", ".join(self.recipients)
        mail["Date"] = formatdate(usegmt=True)
        domain = self.sender.rpartition("@")[2] or "driftline.invalid"
        mail["Message-ID"] = f"<{_KEY_CHARS.sub('-', idempotency_key)}@{_KEY_CHARS.sub('-', domain)}>"
        mail["Auto-Submitted"] = "auto-generated"
        mail.set_content(payload.get("text", ""))
        if payload.get("html"):
            mail.add_alternative(payload["html"], subtype="html")
        return mail

    def send(self, payload: Mapping[str, Any], idempotency_key: str) -> SendResult:
        mail = self.message(payload, idempotency_key)
        client = smtplib.SMTP(timeout=self.timeout, local_hostname=socket.gethostname() or "localhost")
        # connected below, inside the deadline; STARTTLS checks the certificate against the constructor's host only
        client._host = self.host
        watchdog = _Watchdog(client, self.timeout)
        step = "connect"  # named in the error: where the session failed
        try:
            with watchdog:
                client.connect(self.host, self.port)
                client.ehlo()
                if self.starttls:
                    step = "STARTTLS"
                    client.starttls(context=self.ssl_context)
                    client.ehlo()
                if self.username:
                    step = "login"
                    client.login(self.username, self.password or "")
                step = "sending the message"
                refused = client.send_message(mail)
                try:
                    client.quit()
                except (smtplib.SMTPException, OSError):
                    pass  # the message was accepted: a goodbye that fails changes nothing
        except (smtplib.SMTPException, OSError, ValueError) as exc:
            return result_from_smtp_error(exc, self.timeout, watchdog.fired.is_set(), step)
        finally:
            client.close()
        refused_text = {addr: f"{code} {_reply_text(reply)}" for addr, (code, reply) in refused.items()}
        return SendResult(ok=True, status=250, response={"refused": refused_text} if refused else None)

    def close(self) -> None:
        """Nothing pooled: each attempt is its own SMTP session."""
