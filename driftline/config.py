"""One settings object for every stage.

Precedence, highest first: a command-line option, the environment variable
`DRIFTLINE_<OPTION>`, the TOML file given by `--config` (or `DRIFTLINE_CONFIG`),
then the defaults below. Detection thresholds and alert rules have their own
documented defaults in `driftline.defaults`.

Strict: a key of the TOML file that is neither a setting nor a known section
(`driftline.toml_sections.SECTIONS`, which the stages validate), and a `DRIFTLINE_*`
environment variable that is neither a setting nor in `OTHER_ENVIRONMENT_VARIABLES`,
stop the command with an error naming it and the closest known name; every number
is range-checked.
"""
from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any, Callable, Literal, Mapping

import click
from pydantic import Field, PrivateAttr, SecretStr, ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict, TomlConfigSettingsSource

from driftline import defaults
from driftline.errors import UserError
from driftline.toml_sections import SECTIONS, did_you_mean

TOPIC_INFERENCE = "driftline.inference"
TOPIC_LABELS = "driftline.labels"
TOPIC_DEAD_LETTERS = "driftline.inference.dlq"
ALL_TOPICS = (TOPIC_INFERENCE, TOPIC_LABELS, TOPIC_DEAD_LETTERS)

EMBEDDED_BROKER_PORT = 9092
# The published default admin token: good for a loopback demo only (see Settings.worker_host).
DEFAULT_RETRAIN_TOKEN = "driftline-local-token"

ENV_PREFIX = "DRIFTLINE_"
# Variables with the settings' prefix that are not settings; everything the project reads is listed here,
# so that any other DRIFTLINE_* variable is a typo (an error at start, not a setting silently left unset).
ENV_CONFIG = "DRIFTLINE_CONFIG"  # the TOML file, when --config is not given
ENV_TANSU_BIN = "DRIFTLINE_TANSU_BIN"  # another Tansu binary for the embedded broker (driftline/broker_binary.py)
ENV_TANSU_SHA256 = "DRIFTLINE_TANSU_SHA256"  # the sha256 that other binary must have
ENV_DASHBOARD_REFRESH = "DRIFTLINE_DASHBOARD_REFRESH_SECONDS"  # set by `driftline dashboard` for its app
ENV_TEST_PG = "DRIFTLINE_TEST_PG"  # the test suite: PostgreSQL admin URL (tests/conftest.py)
ENV_UPDATE_SCREENSHOT = "DRIFTLINE_UPDATE_SCREENSHOT"  # the test suite: refresh docs/img (tests/dashboard)
OTHER_ENVIRONMENT_VARIABLES = frozenset({ENV_CONFIG, ENV_TANSU_BIN, ENV_TANSU_SHA256, ENV_DASHBOARD_REFRESH,
                                         ENV_TEST_PG, ENV_UPDATE_SCREENSHOT})


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid")

    # Where the embedded defaults keep their files: the SQLite store and model artifacts.
    home: Path = Path(".driftline")
    # SQLAlchemy URL; default: a SQLite file in `home`.
    db: str | None = None
    # Kafka bootstrap servers; the default is the embedded broker that `driftline up`/`broker` starts.
    bootstrap_servers: str = f"127.0.0.1:{EMBEDDED_BROKER_PORT}"
    topic_partitions: int = Field(4, ge=1)

    # Event-time windows (collector, detectors).
    window_seconds: int = Field(60, ge=1)
    allowed_lateness_seconds: int = Field(30, ge=0)
    # A partition idle this long (its reader at the end of the log, nothing new) stops holding back the
    # low watermark that closes windows (docs/collector.md, "Watermarks").
    idle_partition_seconds: int = Field(defaults.IDLE_PARTITION_SECONDS, ge=1)

    # Ports of the local services (0: off, for the collector's metrics).
    worker_port: int = Field(8000, ge=0, le=65535)
    # The worker's Open Inference Protocol gRPC service (`driftline worker --grpc-port`); 0: off.
    worker_grpc_port: int = Field(8001, ge=0, le=65535)
    # A Redis shared by the workers' prediction caches (`driftline worker --cache-url`); None: in-process only.
    worker_cache_url: str | None = None
    collector_metrics_port: int = Field(9108, ge=0, le=65535)
    # The collector's Kafka client: "confluent" (librdkafka) or "kafka-python"; None: confluent where it imports.
    collector_kafka_client: Literal["confluent", "kafka-python"] | None = None
    # The scheduler's /metrics (monitoring results from the store); 0: off (`driftline up` turns it on).
    scheduler_metrics_port: int = Field(0, ge=0, le=65535)
    # Also export per-segment drift ([segments]) there: a series per segment value, so opt-in.
    scheduler_metrics_segments: bool = False
    # Models whose per-feature drift series are exported too (comma-separated names or globs, `*` for all); the
    # others get their drift summed up per version, so a fleet's series grow with models, not models x features.
    scheduler_metrics_detail_models: str = ""
    dashboard_port: int = Field(8501, ge=0, le=65535)
    # Rows per chunk `detect` and `baseline` read their files in (`--batch-rows`): sets their peak memory.
    batch_rows: int = Field(defaults.BATCH_CHUNK_ROWS, ge=1)
    dashboard_url: str = "http://127.0.0.1:8501"
    # Where the dashboard reads a worker's live serving signals (utilisation, replicas, cost, GPU);
    # None: the local worker, http://127.0.0.1:{worker_port}/metrics.
    dashboard_worker_metrics_url: str | None = None

    # Dashboard sign-on (docs/sign-on.md). Where it listens (`driftline dashboard --host`): on any address
    # but loopback it refuses to start unless dashboard_auth is oidc or proxy.
    dashboard_host: str = "127.0.0.1"
    # none: no login (loopback only); oidc: OpenID Connect through Streamlit's st.login; proxy: identity
    # from an authenticating reverse proxy's headers, honoured only from dashboard_proxy_addresses.
    dashboard_auth: Literal["none", "oidc", "proxy"] = "none"
    # OpenID Connect: the provider's discovery document (…/.well-known/openid-configuration), the client
    # registered there, the callback URL (default: dashboard_url + /oauth2callback) and the secret that
    # signs the login cookie (default: a random one per start, so a restart logs everyone out).
    dashboard_oidc_metadata_url: str | None = None
    dashboard_oidc_client_id: str | None = None
    dashboard_oidc_client_secret: SecretStr | None = None
    dashboard_oidc_redirect_uri: str | None = None
    dashboard_oidc_cookie_secret: SecretStr | None = None
    # Scopes asked for, and the ID-token claim (or proxy header, for proxy) that lists the user's groups.
    dashboard_oidc_scopes: str = "openid email profile"
    dashboard_groups_claim: str = "groups"
    # Who may see the dashboard (comma-separated; at least one list is required with a login): e-mail
    # domains, e-mail addresses, groups. A user outside all three is refused.
    dashboard_allowed_domains: str = ""
    dashboard_allowed_users: str = ""
    dashboard_allowed_groups: str = ""
    # oidc: false counts an e-mail for users and domains only when the ID token says email_verified: true, as a
    # provider that lets users edit their e-mail would let anyone claim an allowed one (nOAuth); proxy: unaffected.
    dashboard_trust_unverified_email: bool = False
    # proxy: addresses or networks (CIDR, comma-separated) of the proxy; the headers naming the user.
    dashboard_proxy_addresses: str = ""
    dashboard_proxy_email_header: str = "X-Forwarded-Email"
    dashboard_proxy_groups_header: str = "X-Forwarded-Groups"
    # The Report page shows sampled feature values (personal data in many deployments): false turns it
    # off; with a login it is shown only to members of dashboard_report_group (none: to nobody).
    dashboard_report: bool = True
    dashboard_report_group: str = ""

    # Where the worker listens. On any address but loopback the worker refuses the published
    # default admin token (DEFAULT_RETRAIN_TOKEN): set retrain_token to a secret of your own.
    worker_host: str = "127.0.0.1"
    # Host header names the worker answers besides the loopback ones (comma-separated, :PORT optional;
    # "*" turns the check off): list the names clients use when worker_host is not loopback.
    worker_allowed_hosts: str = ""
    # Fault injection (/admin/faults) exists only when this is set (`driftline worker --faults`;
    # `driftline up` sets it for its scenarios): a fault changes served predictions and latency.
    worker_faults: bool = False
    # The worker logs each request's penultimate-layer activations as the embedding `activations` (`driftline
    # worker --log-embeddings`; `driftline up --scenario embedding_shift` sets it): one more pass per request.
    worker_log_embeddings: bool = False

    # `driftline receiver`: KServe/OIP payload-logger CloudEvents and POST /events (docs/receiver.md).
    # On any address but loopback it refuses to start without receiver_token, which callers then
    # send as `Authorization: Bearer TOKEN` or `?token=TOKEN` on the logger URL.
    receiver_host: str = "127.0.0.1"
    receiver_port: int = Field(8002, ge=0, le=65535)
    receiver_token: SecretStr | None = None
    # Host header names the receiver answers besides the loopback ones (as worker_allowed_hosts; the ingress
    # guard, driftline/ingress.py): list the names loggers use when receiver_host is not loopback.
    receiver_allowed_hosts: str = ""
    # Bytes the halves waiting for their other half hold at most (bodies as received): beyond it the oldest are
    # dead-lettered as unpaired, so a flood of large unpaired halves cannot exhaust memory.
    receiver_max_pending_bytes: int = Field(defaults.RECEIVER_MAX_PENDING_BYTES, ge=1)
    # Distinct models one call may name (a batch beyond it is refused whole with 413): bounds one call's store reads.
    receiver_max_models_per_call: int = Field(defaults.RECEIVER_MAX_MODELS_PER_CALL, ge=1)
    # Refusals one answer lists and dead-letters one by one; the call's others are counted and sent as one letter.
    receiver_max_errors: int = Field(defaults.RECEIVER_MAX_ERRORS, ge=1)
    # A dead letter's bytes on the DLQ topic (a stock broker takes at most 1 MiB); the full size is in a header.
    receiver_dead_letter_raw_bytes: int = Field(defaults.RECEIVER_DEAD_LETTER_RAW_BYTES, ge=1, le=1 << 20)
    # Dead letters waiting for Kafka at most, in count and bytes; beyond them a letter is counted, kept in the store.
    receiver_dead_letter_inflight: int = Field(defaults.RECEIVER_DEAD_LETTER_INFLIGHT, ge=1)
    receiver_dead_letter_inflight_bytes: int = Field(defaults.RECEIVER_DEAD_LETTER_INFLIGHT_BYTES, ge=1)
    # OpenTelemetry traces of LLM and RAG services (docs/llm.md): OTLP gRPC on this port of receiver_host (0: off;
    # OTLP over HTTP is always at POST /v1/traces on receiver_port), and the seconds a trace waits for its root span.
    receiver_otlp_grpc_port: int = Field(defaults.OTLP_GRPC_PORT, ge=0, le=65535)
    receiver_otlp_trace_wait_seconds: float = Field(defaults.OTLP_TRACE_WAIT_SECONDS, gt=0, le=3600)

    # Alert channels. Secrets are SecretStr: their repr, logs and error text never show them;
    # read them with `secret(settings.NAME)`.
    slack_webhook_url: SecretStr | None = None
    pagerduty_routing_key: SecretStr | None = None
    pagerduty_url: str = "https://events.pagerduty.com/v2/enqueue"
    webhook_url: SecretStr | None = None
    webhook_secret: SecretStr | None = None
    retrain_webhook_url: SecretStr | None = None
    # Prometheus Alertmanager base URLs, comma-separated (an HA pair gets every alert; docs/alerts.md).
    alertmanager_url: SecretStr | None = None
    # Microsoft Teams: a Workflows "When a Teams webhook request is received" URL (its query holds the signature).
    teams_webhook_url: SecretStr | None = None
    # E-mail over SMTP: on when smtp_host is set; STARTTLS before AUTH unless smtp_starttls is false (loopback only).
    smtp_host: str | None = None
    smtp_port: int = Field(587, ge=1, le=65535)
    smtp_username: str | None = None
    smtp_password: SecretStr | None = None
    smtp_from: str | None = None
    email_to: str | None = None  # comma-separated addresses
    smtp_starttls: bool = True
    # Bearer token sent to retrain_webhook_url; the admin token below never is (`driftline up` sets
    # this one to its worker's admin token, since its webhook is that worker's POST /admin/retrain).
    retrain_webhook_token: SecretStr | None = None
    # A retrain webhook off loopback must use https (its token travels with it); true allows plain http.
    retrain_webhook_allow_http: bool = False
    # Bearer token that the worker's POST /admin/* calls require.
    retrain_token: SecretStr = SecretStr(DEFAULT_RETRAIN_TOKEN)
    # The sequential paging policy's stated rate ([alerts] false_pages_per_model_per_month; this
    # setting, from DRIFTLINE_FALSE_PAGES_PER_MODEL_PER_MONTH, overrides the file's global value).
    false_pages_per_model_per_month: float | None = Field(None, gt=0, allow_inf_nan=False)

    # Kafka client security, applied to every Kafka client driftline creates (collector,
    # logging client, worker, replay, admin). PLAINTEXT by default (the embedded broker).
    kafka_security_protocol: str = "PLAINTEXT"  # PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL
    kafka_sasl_mechanism: str | None = None  # PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
    kafka_sasl_username: str | None = None
    kafka_sasl_password: SecretStr | None = None
    kafka_ssl_cafile: Path | None = None
    kafka_ssl_certfile: Path | None = None
    kafka_ssl_keyfile: Path | None = None

    # The TOML file these settings were read from (its [drift], [slo], [alerts] sections configure the stages).
    _config_path: Path | None = PrivateAttr(default=None)

    @property
    def config_path(self) -> Path | None:
        return self._config_path

    def section(self, name: str) -> dict[str, Any]:
        """A section of the --config TOML file; {} when there is no file or no such section."""
        return load_toml_section(self._config_path, name) if self._config_path else {}

    def secret_values(self) -> list[str]:
        """Every configured secret in clear text (for scrubbing error text), longest first."""
        values = [secret(getattr(self, name)) for name, field in type(self).model_fields.items()
                  if field.annotation in (SecretStr, SecretStr | None)]
        password = _url_password(self.db_url)
        return sorted({v for v in [*values, password] if v}, key=len, reverse=True)

    @property
    def db_url(self) -> str:
        if self.db:
            return self.db
        return f"sqlite:///{(self.home / 'driftline.db').resolve()}"

    @property
    def artifacts_dir(self) -> Path:
        return (self.home / "models").resolve()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        config_file = _CONFIG_FILE.get("path")
        if config_file:
            sources.append(_TomlSettings(settings_cls, toml_file=config_file))
        return tuple(sources)


class _TomlSettings(TomlConfigSettingsSource):
    """The TOML file's top-level keys, less the sections that the stages read and validate themselves."""

    def __call__(self) -> dict[str, Any]:
        return {k: v for k, v in super().__call__().items() if k not in SECTIONS}


def secret(value: SecretStr | str | None) -> str | None:
    """The clear text of a secret setting (None stays None)."""
    if value is None:
        return None
    return value.get_secret_value() if isinstance(value, SecretStr) else value


def _url_password(url: str) -> str | None:
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).password
    except Exception:  # an unparseable URL has no password we could find
        return None


# The TOML file for the settings being built; set only inside load_settings.
_CONFIG_FILE: dict[str, Path | None] = {}


def load_settings(config_file: str | Path | None = None, **overrides: Any) -> Settings:
    """Build the settings: `overrides` (CLI options; None means "not given") > env > TOML > defaults.

    A `DRIFTLINE_*` variable, a TOML key or an override that names no setting is a `UserError`."""
    config_file = config_file or os.environ.get(ENV_CONFIG)
    path = Path(config_file) if config_file else None
    if path is not None and not path.is_file():
        raise UserError(f"config file {path} does not exist; pass an existing TOML file to --config")
    check_environment()
    given = {k: v for k, v in overrides.items() if v is not None}
    _CONFIG_FILE["path"] = path
    try:
        settings = Settings(**given)
        settings._config_path = path
        return settings
    except ValidationError as exc:
        raise UserError(_describe(exc, path, given)) from None
    except Exception as exc:  # a TOML syntax error, for instance
        raise UserError(f"cannot read settings: {exc}") from None
    finally:
        _CONFIG_FILE.clear()


def environment_variable(setting: str) -> str:
    """The environment variable of a setting: `db` -> `DRIFTLINE_DB`."""
    return ENV_PREFIX + setting.upper()


def check_environment(environ: Mapping[str, str] | None = None) -> None:
    """A `UserError` for the first `DRIFTLINE_*` variable that is neither a setting nor a variable the
    project reads otherwise, naming the closest known one (names are case-insensitive, as for settings)."""
    environ = os.environ if environ is None else environ
    known = {environment_variable(name) for name in Settings.model_fields} | OTHER_ENVIRONMENT_VARIABLES
    for name in sorted(environ):
        upper = name.upper()
        if upper.startswith(ENV_PREFIX) and upper not in known:
            # matched on the part after the prefix, which every name shares
            hint = did_you_mean(upper[len(ENV_PREFIX):], sorted(k[len(ENV_PREFIX):] for k in known),
                                ENV_PREFIX + "{}")
            raise UserError(f"unknown environment variable {name}: no setting has that name{hint}")


def _describe(exc: ValidationError, path: Path | None, given: Mapping[str, Any]) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    if first["type"] != "extra_forbidden":
        return f"invalid setting {where}: {first['msg']}"
    if where in given:  # a keyword of load_settings: a program's mistake, not a user's
        return f"unknown setting {where!r}{did_you_mean(where, list(Settings.model_fields))}"
    if isinstance(first["input"], Mapping):
        return f"{path}: unknown section [{where}]{did_you_mean(where, list(SECTIONS), '[{}]')}"
    return f"{path}: unknown setting {where!r}{did_you_mean(where, [*Settings.model_fields, *SECTIONS])}"


def load_toml_section(config_file: str | Path | None, section: str) -> dict[str, Any]:
    """A section of the --config TOML file (for thresholds, SLOs and alert rules); {} if absent."""
    import tomllib

    config_file = config_file or os.environ.get(ENV_CONFIG)
    if not config_file:
        return {}
    try:
        with open(config_file, "rb") as fh:
            found = tomllib.load(fh).get(section, {})
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise UserError(f"cannot read config file {config_file}: {exc}") from None
    if not isinstance(found, dict):
        raise UserError(f"{config_file}: [{section}] must be a table, got {found!r}")
    return dict(found)


def common_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Add --db, --bootstrap-servers and --config to a command; it receives `settings`."""

    @click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None,
                  help="TOML settings file (env DRIFTLINE_CONFIG).")
    @click.option("--bootstrap-servers", default=None,
                  help="Kafka bootstrap servers HOST:PORT (env DRIFTLINE_BOOTSTRAP_SERVERS; default: the embedded broker).")
    @click.option("--db", default=None, help="Store URL, e.g. postgresql+psycopg://user@host/db (env DRIFTLINE_DB; default: a SQLite file).")
    @functools.wraps(func)
    def wrapper(*args: Any, config_file: str | None, bootstrap_servers: str | None, db: str | None, **kwargs: Any) -> Any:
        settings = load_settings(config_file, bootstrap_servers=bootstrap_servers, db=db)
        return func(*args, settings=settings, **kwargs)

    return wrapper
