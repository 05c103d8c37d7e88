"""`driftline alerts`: list alerts, silences and undelivered notifications; manage silences; retry failures."""
from __future__ import annotations

import getpass

import click
import orjson
from sqlalchemy import func, select

from driftline.config import common_options
from driftline.errors import UserError
from driftline.redact import scrub
from driftline.store import db as store_db
from driftline.store.models import Alert, Notification
from driftline.vocabulary import ALERT_ACTIVE, NOTIFICATION_FAILED

from driftline.alerts.channels.registry import CHANNELS
from driftline.alerts.messages import event_windows
from driftline.alerts.outbox import requeue_failed
from driftline.alerts.rules import DETECTORS
from driftline.alerts.silences import active_silences, create_silence, expire_silence
from driftline.alerts.times import iso, parse_duration, utcnow


@click.group()
def alerts() -> None:
    """List alerts and manage silences."""


def _alert_doc(a: Alert) -> dict:
    return {"fingerprint": a.fingerprint, "model": a.model, "version": a.version, "detector": a.detector,
            "feature": a.feature, "severity": a.severity, "state": a.state, "summary": a.summary,
            "started_at": iso(a.started_at), "fired_at": iso(a.fired_at), "resolved_at": iso(a.resolved_at),
            "last_notified_at": iso(a.last_notified_at),
            # event time (a backfill's wall-clock times are all the same minute)
            **event_windows(a.first_window_start_ms, a.fired_window_start_ms)}


@alerts.command("list")
@click.option("--all", "show_all", is_flag=True, help="Include resolved alerts.")
@click.option("--model", default=None, help="Only this model.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@common_options
def list_alerts(show_all: bool, model: str | None, as_json: bool, settings) -> None:  # noqa: ANN001
    """Alerts (pending and firing; --all adds resolved), active silences, and the outbox's state."""
    store_db.require_migrated(settings.db_url)
    now = utcnow()
    with store_db.session_scope(settings.db_url) as session:
        query = select(Alert).order_by(Alert.model, Alert.version, Alert.detector, Alert.feature)
        if not show_all:
            query = query.where(Alert.state.in_(ALERT_ACTIVE))
        if model:
            query = query.where(Alert.model == model)
        rows = [_alert_doc(a) for a in session.scalars(query)]
        silences = [{"id": s.id, "model": s.model, "detector": s.detector, "feature": s.feature,
                     "comment": s.comment, "created_by": s.created_by, "expires_at": iso(s.expires_at)}
                    for s in active_silences(session, now=now)]
        counts = dict(session.execute(select(Notification.status, func.count()).group_by(Notification.status)).all())
        secrets = settings.secret_values()  # rows stored by older versions may hold one
        failed = [{"id": n.id, "channel": n.channel, "kind": n.kind, "attempts": n.attempts,
                   "created_at": iso(n.created_at), "last_error": scrub(n.last_error or "", secrets) or None}
                  for n in session.scalars(select(Notification).where(Notification.status == NOTIFICATION_FAILED)
                                           .order_by(Notification.id))]
    doc = {"alerts": rows, "silences": silences,
           "outbox": {"counts": {k: int(v) for k, v in counts.items()}, "failed": failed}}
    if as_json:
        click.echo(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode())
        return
    if not rows:
        click.echo("No alerts." if show_all else "No pending or firing alerts.")
    for a in rows:
        where = f" {a['feature']}" if a["feature"] else ""
        click.echo(f"{a['state']:<9} [{a['severity']}] {a['model']} v{a['version']} {a['detector']}{where}: "
                   f"{a['summary']}  ({a['fingerprint'][:12]})")
    if silences:
        click.echo("silences:")
        for s in silences:
            scope = " ".join(f"{k}={s[k]}" for k in ("model", "detector", "feature") if s[k])
            click.echo(f"  #{s['id']} {scope} until {s['expires_at']}: {s['comment']}"
                       f"{' (' + s['created_by'] + ')' if s['created_by'] else ''}")
    summary = ", ".join(f"{k} {v}" for k, v in sorted(doc["outbox"]["counts"].items())) or "empty"
    click.echo(f"outbox: {summary}")
    for n in failed:
        click.echo(f"  failed #{n['id']} {n['channel']} {n['kind']} after {n['attempts']} attempt(s): "
                   f"{(n['last_error'] or '')[:200]}  (driftline alerts retry {n['id']})")


@alerts.command("silence")
@click.option("--model", required=True, help="Model whose alerts to silence.")
@click.option("--detector", type=click.Choice(DETECTORS), default=None, help="Only this detector (default: all).")
@click.option("--feature", default=None, help="Only this feature (default: all).")
@click.option("--for", "duration", required=True, help="How long, e.g. 30m, 2h, 1d.")
@click.option("--comment", required=True, help="Why (shown in `driftline alerts list`).")
@click.option("--created-by", default=None, help="Who (default: the current user).")
@common_options
def silence(model: str, detector: str | None, feature: str | None, duration: str, comment: str,
            created_by: str | None, settings) -> None:  # noqa: ANN001
    """Mute notifications of matching alerts until the silence expires."""
    store_db.require_migrated(settings.db_url)
    length = parse_duration(duration, "--for")
    if created_by is None:
        try:
            created_by = getpass.getuser()
        except Exception:  # no user name in some containers
            created_by = ""
    with store_db.session_scope(settings.db_url) as session:
        row = create_silence(session, model=model, detector=detector, feature=feature, duration=length,
                             comment=comment, created_by=created_by, now=utcnow())
        click.echo(f"silence #{row.id} until {iso(row.expires_at)} "
                   f"(expire it early with: driftline alerts expire {row.id})")


@alerts.command("expire")
@click.argument("silence_id", type=int)
@common_options
def expire(silence_id: int, settings) -> None:  # noqa: ANN001
    """End a silence now."""
    store_db.require_migrated(settings.db_url)
    with store_db.session_scope(settings.db_url) as session:
        row = expire_silence(session, silence_id, now=utcnow())
        click.echo(f"silence #{row.id} expired at {iso(row.expires_at)}")


@alerts.command("retry")
@click.argument("ids", type=int, nargs=-1)
@click.option("--failed", "all_failed", is_flag=True, help="Every failed notification.")
@click.option("--channel", type=click.Choice(list(CHANNELS)), default=None,
              help="Only this channel's failed notifications.")
@common_options
def retry(ids: tuple[int, ...], all_failed: bool, channel: str | None, settings) -> None:  # noqa: ANN001
    """Queue failed notifications again, with a fresh retry budget."""
    if not ids and not all_failed and channel is None:
        raise UserError("name the notifications to retry (ids from `driftline alerts list`), or pass --failed")
    store_db.require_migrated(settings.db_url)
    with store_db.session_scope(settings.db_url) as session:
        requeued, skipped = requeue_failed(session, now=utcnow(), ids=list(ids) or None, channel=channel)
    click.echo(f"requeued {len(requeued)} notification(s)" + (f": {', '.join(map(str, requeued))}" if requeued else ""))
    if skipped:
        click.echo(f"skipped {len(skipped)} already superseded by a later sent notification: "
                   f"{', '.join(map(str, skipped))}")
    if ids and not requeued and not skipped:
        raise UserError(f"no failed notification among {', '.join(map(str, ids))}")
