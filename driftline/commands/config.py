"""`driftline config check`: validate the settings (TOML file and environment) and every section, then print
the effective settings with secrets masked.

It runs the same checks the stages run when they start (the sections are each read by the stage that uses
them), so a file that passes here starts every stage; exit status 1 with the first problem otherwise.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click
from pydantic import SecretStr

from driftline.config import Settings, environment_variable, load_settings, load_toml_section
from driftline.redact import MASK, scrub
from driftline.toml_sections import SECTIONS


@click.group()
def config() -> None:
    """Check the configuration."""


@config.command()
@click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None,
              help="TOML settings file (env DRIFTLINE_CONFIG).")
def check(config_file: str | None) -> None:
    """Validate the settings and every section; print the effective settings, secrets masked."""
    settings = load_settings(config_file)
    channels, warnings = validate_sections(settings)
    path = settings.config_path
    present = [name for name in SECTIONS if path is not None and load_toml_section(path, name)]
    click.echo(f"# {path if path else 'no config file'}: valid"
               + (f" (sections: {', '.join(f'[{name}]' for name in present)})" if present else ""))
    click.echo(f"# {channels}")
    for warning in warnings:
        click.echo(f"# warning: {warning}")
    for name, value, source in effective_settings(settings):
        click.echo(f"{name} = {value}  # {source}")


def validate_sections(settings: Settings) -> tuple[str, list[str]]:
    """Run every section's parser (a `UserError` names the first problem); returns the live alert channels, in
    words, and the channels' warnings (driftline.alerts.channels.registry: every channel checks its settings)."""
    from driftline.alerts import load_rules
    from driftline.alerts.channels.validation import check_channel_settings
    from driftline.kafka_security import KafkaSecurity
    from driftline.scheduler.evaluation_config import EvaluationConfig
    from driftline.scheduler.retention import RetentionPolicy
    from driftline.scheduler.rollouts import ROLLOUTS_SECTION, RolloutPolicies
    from driftline.scheduler.startup import describe_channels
    from driftline.worker.serving_signals import SignalsConfig

    KafkaSecurity.from_settings(settings)
    warnings = check_channel_settings(settings)
    EvaluationConfig.from_settings(settings)  # the detectors' sections and [segments]
    RetentionPolicy.from_settings(settings)
    RolloutPolicies(settings.section(ROLLOUTS_SECTION))
    SignalsConfig.from_settings(settings)  # the worker's [cost] and [capacity]
    from driftline.llm_settings import LlmSettings

    LlmSettings.from_mapping(settings.section("llm"))  # the receiver's traces
    rules = load_rules(settings, settings.config_path)
    return describe_channels(rules.channels, rules.retrain.enabled), warnings


def effective_settings(settings: Settings) -> list[tuple[str, str, str]]:
    """(setting, value as TOML would write it, where it came from) for every setting; secrets are masked,
    and so is any password or query in a URL."""
    secrets = settings.secret_values()
    top = _file_keys(settings.config_path)
    rows = []
    for name in type(settings).model_fields:
        value: Any = getattr(settings, name)
        if value is None:
            shown = "unset"
        elif isinstance(value, SecretStr):
            shown = f'"{MASK}"'
        elif isinstance(value, bool):
            shown = str(value).lower()
        elif isinstance(value, (int, float)):
            shown = str(value)
        else:
            shown = '"' + scrub(str(value), secrets) + '"'
        source = ("environment" if environment_variable(name) in {k.upper() for k in os.environ}
                  else "file" if name in top else "default")
        rows.append((name, shown, source))
    return rows


def _file_keys(path: Path | None) -> set[str]:
    if path is None:
        return set()
    import tomllib

    with open(path, "rb") as fh:
        return set(tomllib.load(fh))
