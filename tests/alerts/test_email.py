"""E-mail: one message per notification through a real SMTP server on loopback (aiosmtpd), STARTTLS and AUTH."""
from __future__ import annotations

import base64
import logging
import socket
import ssl
import threading
from datetime import timedelta

import pytest
from driftline.alerts import Channels, DeliveryPolicy, deliver_due, load_rules
from driftline.alerts import outbox
from driftline.alerts.channels.email import EmailChannel, render_email
from driftline.alerts.channels.validation import check_channel_settings
from driftline.config import Settings
from driftline.errors import UserError
from driftline.store.db import session_scope
from driftline.store.models import Notification
from tests.alerts.test_channels import NOW, PHISH, SCRIPT, hostile_message, make_alert, message
from tests.support.cli import run_cli
from tests.support.smtp_server import SmtpServer, tls_pair

LOGIN = "alerts@example.com"
PASSWORD = "smtp-Pa55word-for-tests"
POLICY = DeliveryPolicy(timeout=timedelta(seconds=5), lease=timedelta(seconds=30),
                        backoff_initial=timedelta(seconds=1), backoff_max=timedelta(seconds=10),
                        max_age=timedelta(minutes=5), max_attempts=5)


@pytest.fixture(scope="module")
def tls():
    return tls_pair()


@pytest.fixture(scope="module")
def smtp(tls):
    """A submission server: STARTTLS required, AUTH only over TLS."""
    server = SmtpServer(tls=tls[0], require_starttls=True, login=LOGIN, password=PASSWORD).start()
    yield server
    server.stop()


@pytest.fixture
def inbox(smtp):
    smtp.messages.clear()
    smtp.logins.clear()
    smtp.reply_to_data = None
    return smtp


def channel(server_port: int, client_tls: ssl.SSLContext | None, password: str = PASSWORD, starttls: bool = True,
            timeout: float = 5.0) -> EmailChannel:
    return EmailChannel("127.0.0.1", server_port, "driftline@example.com", ["oncall@example.com", "ml@example.com"],
                        username=LOGIN, password=password, starttls=starttls, ssl_context=client_tls, timeout=timeout)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_notification_goes_out_over_starttls_after_login_with_text_and_html(inbox, tls):
    payload = render_email(message("trigger", [make_alert("income"), make_alert("age", value=0.5)],
                                   related=["income", "age"]))
    result = channel(inbox.port, tls[1]).send(payload, "trigger-0a1b2c")
    assert (result.ok, result.status) == (True, 250)
    (received,) = inbox.messages
    assert received.encrypted and received.login == LOGIN
    assert received.mail_from == "driftline@example.com"
    assert received.rcpt_tos == ["oncall@example.com", "ml@example.com"]
    mail = received.message
    assert mail["Subject"] == "[FIRING] data drift on credit v3: 2 features drifted (age, income)"
    assert mail["Message-ID"] == "<trigger-0a1b2c@example.com>" and mail["Auto-Submitted"] == "auto-generated"
    text = mail.get_body(("plain",)).get_content()
    assert "Model: credit" in text and "Drifted features (2): age, income" in text
    assert "- income: psi 0.31 vs threshold 0.2 (data drift)" in text
    assert "Dashboard: http://dash.example:8501/?model=credit&version=3" in text
    html = mail.get_body(("html",)).get_content()
    assert '<a href="http://dash.example:8501/?model=credit&amp;version=3">' in html


def test_hostile_values_are_escaped_in_html_and_cannot_add_a_header(inbox, tls):
    msg = hostile_message()
    msg["title"] = f"[FIRING] {PHISH}\r\nBcc: victim@example.com"
    result = channel(inbox.port, tls[1]).send(render_email(msg), "k-hostile")
    assert result.ok
    mail = inbox.messages[0].message
    assert mail["Bcc"] is None and inbox.messages[0].rcpt_tos == ["oncall@example.com", "ml@example.com"]
    assert "\n" not in mail["Subject"] and "Bcc: victim@example.com" in mail["Subject"]
    html = mail.get_body(("html",)).get_content()
    assert "<script" not in html and "<!channel>" not in html and "<https://evil" not in html
    assert "&lt;/script&gt;&lt;script&gt;" in html
    assert SCRIPT in mail.get_body(("plain",)).get_content()  # plain text shows values as they are


def test_a_wrong_password_is_refused_for_good_and_the_password_is_never_logged(inbox, tls, caplog):
    caplog.set_level(logging.DEBUG)
    wrong = "Wr0ng-" + PASSWORD
    result = channel(inbox.port, tls[1], password=wrong).send(render_email(message("trigger", [make_alert("a")])), "k")
    assert (result.ok, result.status, result.retryable) == (False, 535, False)
    assert result.error.startswith("SMTP login refused: 535") and not inbox.messages
    encoded = base64.b64encode(f"\0{LOGIN}\0{wrong}".encode()).decode()
    for leak in (wrong, encoded, base64.b64encode(wrong.encode()).decode()):
        assert leak not in result.error and leak not in caplog.text


def test_a_server_without_starttls_gets_neither_the_message_nor_the_password(tls):
    plain = SmtpServer(login=None).start()  # no TLS offered at all
    try:
        result = channel(plain.port, tls[1]).send(render_email(message("trigger", [make_alert("a")])), "k")
        assert (result.ok, result.retryable) == (False, False)
        assert "offers no STARTTLS" in result.error and not plain.messages and not plain.logins
        # told to log in where the server offers no AUTH: refused for good, naming the step
        result = channel(plain.port, None, starttls=False).send(render_email(message("trigger", [make_alert("a")])),
                                                                "k")
        assert (result.ok, result.retryable) == (False, False) and "what login needs" in result.error
    finally:
        plain.stop()


def test_a_certificate_that_does_not_verify_fails_for_good(inbox):
    result = channel(inbox.port, ssl.create_default_context()).send(
        render_email(message("trigger", [make_alert("a")])), "k")
    assert (result.ok, result.retryable) == (False, False) and "does not verify" in result.error
    assert not inbox.logins


def test_a_transient_4xx_reply_is_retried_and_a_permanent_5xx_is_not(inbox, tls):
    inbox.reply_to_data = "451 4.3.0 Mailbox busy, try again later"
    result = channel(inbox.port, tls[1]).send(render_email(message("trigger", [make_alert("a")])), "k")
    assert (result.ok, result.status, result.retryable) == (False, 451, True) and "try again later" in result.error
    inbox.reply_to_data = "554 5.7.1 Message rejected as spam"
    result = channel(inbox.port, tls[1]).send(render_email(message("trigger", [make_alert("a")])), "k")
    assert (result.ok, result.status, result.retryable) == (False, 554, False)


class TricklingSmtp:
    """Accepts one connection and sends its greeting one byte every 0.3 s: no line ever completes in time."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.hung_up = threading.Event()
        self.completed = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        with conn:
            for byte in b"220 " + b"x" * 200 + b"\r\n":
                try:
                    conn.sendall(bytes([byte]))
                except OSError:
                    self.hung_up.set()
                    return
                if self.hung_up.wait(0.3):
                    return
                try:
                    if conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b"":  # the client hung up
                        self.hung_up.set()
                        return
                except BlockingIOError:
                    pass  # nothing sent, still connected
            self.completed.set()

    def close(self) -> None:
        self.hung_up.set()
        self.sock.close()


def test_a_trickling_server_is_hung_up_on_at_the_delivery_deadline(tls):
    trickler = TricklingSmtp()
    try:
        result = channel(trickler.port, tls[1], timeout=1.0).send(
            render_email(message("trigger", [make_alert("a")])), "k")
        assert (result.ok, result.retryable) == (False, True) and "timed out after 1s at connect" in result.error
        assert not trickler.completed.is_set()
    finally:
        trickler.close()


def test_a_server_that_is_down_loses_nothing_the_outbox_retries_until_it_is_up(sqlite_url, tls, caplog):
    port = free_port()
    settings = Settings(smtp_host="127.0.0.1", smtp_port=port, smtp_username=LOGIN, smtp_password=PASSWORD,
                        smtp_from="driftline@example.com", email_to="oncall@example.com, ml@example.com")
    assert check_channel_settings(settings) == []
    assert load_rules(settings).channels == {"email": "warning"}
    chans = Channels.from_settings(settings, timeout=2)
    chans.email.ssl_context = tls[1]  # the test's own CA; production verifies against the system's
    with session_scope(sqlite_url) as s:
        outbox.enqueue(s, idempotency_key="k-mail", channel="email", kind="trigger", alert_fingerprint="g",
                       payload=render_email(message("trigger", [make_alert("income")])), now=NOW)
    caplog.set_level(logging.DEBUG)
    down = deliver_due(sqlite_url, channels=chans, now=NOW, policy=POLICY, lane="email")
    assert down.retrying and "ConnectionRefusedError" in down.errors[down.retrying[0]]
    server = SmtpServer(tls=tls[0], require_starttls=True, login=LOGIN, password=PASSWORD, port=port).start()
    try:
        up = deliver_due(sqlite_url, channels=chans, now=NOW + timedelta(minutes=1), policy=POLICY, lane="email")
        assert up.sent == down.retrying and len(server.messages) == 1 and server.messages[0].encrypted
    finally:
        server.stop()
    with session_scope(sqlite_url) as s:
        row = s.query(Notification).one()
        assert (row.status, row.attempts, row.response_status) == ("sent", 2, 250)
        assert PASSWORD not in str(row.payload) and PASSWORD not in str(row.last_error)
    assert PASSWORD not in caplog.text


@pytest.mark.parametrize("settings, problem", [
    ({"email_to": "oncall@example.com"}, r"^smtp_from is not set"),
    ({"smtp_from": "driftline@example.com"}, r"^email_to names no address"),
    ({"smtp_from": "driftline@example.com", "email_to": "oncall@example.com, not-an-address"},
     r"^email_to: 'not-an-address' is not an e-mail address"),
    ({"smtp_from": "driftline@example.com", "email_to": "a@example.com", "smtp_username": "u",
      "smtp_starttls": False}, r"^smtp_starttls is false but smtp\.example\.com is not loopback"),
])
def test_bad_email_settings_stop_the_start_naming_the_setting(settings, problem):
    with pytest.raises(UserError, match=problem):
        check_channel_settings(Settings(smtp_host="smtp.example.com", **settings))


def test_config_check_runs_the_channel_checks_and_masks_the_password(tmp_path, capsys):
    config = tmp_path / "driftline.toml"
    config.write_text(f'smtp_host = "smtp.example.com"\nsmtp_from = "driftline@example.com"\n'
                      f'email_to = "oncall@example.com"\nsmtp_username = "{LOGIN}"\nsmtp_password = "{PASSWORD}"\n'
                      '[alerts.channels]\nemail = "error"\n')
    code, out, err = run_cli(["config", "check", "--config", str(config)], capsys)
    assert code == 0, err
    assert "alert channels: email from error" in out and 'smtp_password = "***"' in out
    assert PASSWORD not in out + err
    config.write_text(config.read_text().replace(f'smtp_username = "{LOGIN}"\n', ""))
    code, out, err = run_cli(["config", "check", "--config", str(config)], capsys)
    assert code == 0 and "# warning: smtp_password is set but smtp_username is not" in out
    config.write_text(config.read_text().replace('email_to = "oncall@example.com"\n', ""))
    code, out, err = run_cli(["config", "check", "--config", str(config)], capsys)
    assert code != 0 and "email_to names no address" in err
