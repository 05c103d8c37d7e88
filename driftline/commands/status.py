"""`driftline status`: what the store knows, for people (table) and programs (--json)."""
from __future__ import annotations

import time

import click
import orjson

from driftline.commands.rollout import describe_ended, describe_plan
from driftline.config import common_options
from driftline.progress import clock, collectors_sentence
from driftline.store import db as store_db
from driftline.store.queries import status_report
from driftline.vocabulary import ALERT_FIRING

# Quarantined windows listed in the table: a screenful; --json has them all.
_LISTED_QUARANTINED = 20


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the status document as JSON.")
@common_options
def status(as_json: bool, settings) -> None:  # noqa: ANN001
    """Models, versions, event and window counts, how far they are judged, the collectors' watermark, dead letters,
    firing alerts, quarantined windows."""
    store_db.require_migrated(settings.db_url)
    now_ms = int(time.time() * 1000)
    with store_db.session_scope(settings.db_url) as session:
        report = status_report(session, now_ms=now_ms, idle_ms=settings.idle_partition_seconds * 1000)
    if as_json:
        click.echo(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
        return
    if not report["models"]:
        click.echo("No models yet: run `driftline train` (or `driftline baseline` for a model served elsewhere).")
    else:
        click.echo(f"{'MODEL':<24} {'VERSION':<10} {'EVENTS':>10} {'WINDOWS':>8} {'LATE':>6}  {'JUDGED UP TO':<23}  "
                   "PRODUCTION")
        for row in report["models"]:
            judged = "-" if row["judged_up_to_ms"] is None else clock(row["judged_up_to_ms"], now_ms)
            click.echo(f"{row['model']:<24} {row['version']:<10} {row['events']:>10} {row['windows']:>8} "
                       f"{row['late_events']:>6}  {judged:<23}  {'yes' if row['production'] else ''}")
    click.echo(collectors_sentence(report["stream_watermark_ms"], report["watermarks"], now_ms))
    click.echo(f"dead letters: {report['dead_letters']}")
    firing = [a for a in report["alerts"] if a["state"] == ALERT_FIRING]
    click.echo(f"firing alerts: {len(firing)}")
    for alert in firing:
        click.echo(f"  [{alert['severity']}] {alert['model']} v{alert['version']} {alert['detector']}"
                   f"{' ' + alert['feature'] if alert['feature'] else ''}: {alert['summary']}")
    click.echo(f"rollouts: {len(report['rollouts'])}")
    for rollout in report["rollouts"]:
        if rollout["outcome"] != "running":
            click.echo(f"  {describe_ended(rollout)}")
            continue
        click.echo(f"  {rollout['model']}: {describe_plan(rollout['plan'])} (production {rollout['production']}, "
                   f"verdict {rollout['verdict'] or 'none yet'}, {len(rollout['steps'])} steps)")
    quarantined = report["quarantined_windows"]
    click.echo(f"quarantined windows: {len(quarantined)}")
    for q in quarantined[:_LISTED_QUARANTINED]:
        click.echo(f"  {q['model']} v{q['version']} window {q['window_start']}: {q['error_type']}: {q['error']} "
                   f"(attempts {q['attempts']}, next retry {q['next_retry']})")
    if len(quarantined) > _LISTED_QUARANTINED:
        click.echo(f"  ... and {len(quarantined) - _LISTED_QUARANTINED} more (`driftline status --json` lists them all)")
