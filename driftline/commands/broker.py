"""`driftline broker`: the embedded Kafka-compatible broker in the foreground."""
from __future__ import annotations

import signal
import threading

import click

from driftline.broker import EmbeddedBroker
from driftline.config import EMBEDDED_BROKER_PORT, load_settings


@click.command()
@click.option("--port", type=click.IntRange(1, 65535), default=EMBEDDED_BROKER_PORT, show_default=True,
              help="Port to listen on (127.0.0.1 only).")
@click.option("--partitions", type=click.IntRange(1, 256), default=None,
              help="Partitions per topic (default: settings.topic_partitions, 4).")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None, help="TOML settings file.")
def broker(port: int, partitions: int | None, config_file: str | None) -> None:
    """Run the embedded broker on 127.0.0.1 until Ctrl-C or SIGTERM.

    Storage is in memory: stopping the broker loses its topics and data.
    """
    settings = load_settings(config_file)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    embedded = EmbeddedBroker(port=port, partitions=partitions or settings.topic_partitions, log=None)
    embedded.start()
    click.echo(f"driftline broker: listening on {embedded.bootstrap_servers} "
               f"(topics created with {embedded.partitions} partitions; memory storage). Ctrl-C to stop.", err=True)
    try:
        while not stop.wait(0.5):
            if not embedded.is_running():
                raise click.ClickException("the broker process exited unexpectedly")
    finally:
        embedded.stop()
        click.echo("driftline broker: stopped", err=True)
