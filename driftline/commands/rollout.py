"""`driftline rollout`: shadow, canary and A/B routing plans next to a model's production alias.

Running workers pick a change up at their next alias poll (`driftline worker --alias-poll`).
"""
from __future__ import annotations

from typing import Any

import click
import orjson

from driftline.config import Settings, common_options
from driftline.names import name_problem


def _name(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    problem = None if value is None else name_problem(value)
    if problem is not None:
        raise click.BadParameter(problem)
    return value


model_option = click.option("--model", required=True, callback=_name, help="Model name in the registry.")
reason_option = click.option("--reason", default=None, help="Why (kept in the rollout's history of steps).")


def describe_plan(plan: dict[str, Any] | None) -> str:
    """One line for people: "canary of version 4 at 5%"."""
    if plan is None:
        return "production only"
    if plan["mode"] == "shadow":
        return f"shadow of version {plan['candidate']} on {plan['share'] * 100:g}% of requests"
    if plan["mode"] == "canary":
        return f"canary of version {plan['candidate']} at {plan['weight']:g}%"
    return "A/B test " + ", ".join(f"version {a['version']} {a['weight']:g}%" for a in plan["arms"])


def _set(settings: Settings, plan: Any, reason: str | None) -> None:
    from driftline.store import db
    from driftline.store.rollouts import BY_CLI, set_plan

    db.require_migrated(settings.db_url)
    with db.session_scope(settings.db_url) as session:
        previous = set_plan(session, plan, by=BY_CLI, reason=reason)
    click.echo(f"{plan.model}: {describe_plan(plan.to_dict())}"
               + (f" (was: {describe_plan(previous)})" if previous else " (was: production only)"))


@click.group()
def rollout() -> None:
    """Shadow, canary and A/B rollouts of a candidate version beside production."""


@rollout.command()
@model_option
@click.option("--version", "version", required=True, callback=_name, help="The candidate version.")
@click.option("--share", type=float, default=1.0, show_default=True,
              help="Fraction of requests also run on the candidate, in (0, 1].")
@reason_option
@common_options
def shadow(settings: Settings, model: str, version: str, share: float, reason: str | None) -> None:
    """Also run requests on VERSION off the request path; its answers are logged, never returned."""
    from driftline.rollouts import shadow_plan

    _set(settings, shadow_plan(model, version, share), reason)


@rollout.command()
@model_option
@click.option("--version", "version", required=True, callback=_name, help="The candidate version.")
@click.option("--weight", type=float, required=True, help="Percent of requests the candidate answers, in (0, 100].")
@reason_option
@common_options
def canary(settings: Settings, model: str, version: str, weight: float, reason: str | None) -> None:
    """Let VERSION answer WEIGHT percent of requests (sticky by entity_id); production answers the rest."""
    from driftline.rollouts import canary_plan

    _set(settings, canary_plan(model, version, weight), reason)


@rollout.command()
@model_option
@click.option("--arms", required=True, help="VERSION:WEIGHT pairs whose weights sum to 100, e.g. 3:50,4:50.")
@reason_option
@common_options
def ab(settings: Settings, model: str, arms: str, reason: str | None) -> None:
    """Split requests between versions by weight (sticky by entity_id)."""
    from driftline.rollouts import ab_plan, parse_arms

    _set(settings, ab_plan(model, parse_arms(arms)), reason)


@rollout.command()
@model_option
@reason_option
@common_options
def clear(settings: Settings, model: str, reason: str | None) -> None:
    """End the model's rollout: production answers every request again."""
    from driftline.store import db
    from driftline.store.rollouts import BY_CLI, clear_plan

    db.require_migrated(settings.db_url)
    with db.session_scope(settings.db_url) as session:
        previous = clear_plan(session, model, by=BY_CLI, reason=reason)
    click.echo(f"{model}: production only" + (f" (was: {describe_plan(previous)})" if previous
                                              else " (there was no rollout)"))


@rollout.command(name="status")
@click.option("--json", "as_json", is_flag=True, help="Print the rollouts as JSON.")
@common_options
def rollout_status(settings: Settings, as_json: bool) -> None:
    """The running rollouts (plan, production version, latest verdict, steps) and those ended in the last 7 days."""
    from driftline.store import db
    from driftline.store.rollout_history import status_rollouts

    db.require_migrated(settings.db_url)
    with db.session_scope(settings.db_url) as session:
        found = status_rollouts(session)
    if as_json:
        click.echo(orjson.dumps(found, option=orjson.OPT_INDENT_2).decode())
        return
    if not any(entry["outcome"] == "running" for entry in found):
        click.echo("no rollouts: production answers every request")
    for entry in found:
        if entry["outcome"] == "running":
            click.echo(f"{entry['model']}: {describe_plan(entry['plan'])} beside production version "
                       f"{entry['production']}; verdict {entry['verdict'] or 'none yet'}"
                       + (f", A/B winner version {entry['winner']}" if entry["winner"] else ""))
        else:
            click.echo(describe_ended(entry))
        _echo_reasons_and_steps(entry)


def describe_ended(entry: dict[str, Any]) -> str:
    """One line for an ended rollout, e.g. "credit: canary of version 2 ended 2026-... : rolled back (verdict fail)"."""
    outcome = {"promoted": "promoted", "rolled_back": "rolled back", "cleared": "cleared"}.get(
        entry["outcome"], entry["outcome"])
    return (f"{entry['model']}: {entry['mode']} of version {entry['candidate']} ended {entry['ended_at']}: "
            f"{outcome} by {entry['ended_by']} (verdict {entry['verdict'] or 'none'})")


@rollout.command()
@model_option
@click.option("--json", "as_json", is_flag=True, help="Print the rollouts as JSON.")
@common_options
def history(settings: Settings, model: str, as_json: bool) -> None:
    """Every rollout of a model, oldest first: mode, candidate, outcome, final verdict and reasons, steps."""
    from driftline.store import db
    from driftline.store.rollout_history import public, rollout_history

    db.require_migrated(settings.db_url)
    with db.session_scope(settings.db_url) as session:
        found = [public(r) for r in rollout_history(session, model)]
    if as_json:
        click.echo(orjson.dumps(found, option=orjson.OPT_INDENT_2).decode())
        return
    if not found:
        click.echo(f"{model}: no rollouts yet")
    for entry in found:
        if entry["outcome"] == "running":
            click.echo(f"{model}: {entry['mode']} of version {entry['candidate']} since {entry['started_at']}: "
                       f"running (verdict {entry['verdict'] or 'none yet'})")
        else:
            click.echo(describe_ended(entry))
        _echo_reasons_and_steps(entry)


def _echo_reasons_and_steps(entry: dict[str, Any]) -> None:
    for reason in entry["reasons"]:
        click.echo(f"  - {reason}")
    for step in entry["steps"]:
        click.echo(f"  {step['at']} {step['by']}: {describe_plan(step['to'])}"
                   + (f" ({step['reason']})" if step["reason"] else ""))
