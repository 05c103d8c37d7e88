"""Kafka client security (TLS, SASL) from the settings, for kafka-python and for librdkafka.

Every Kafka client driftline creates takes its security from here: the collector's consumer
and DLQ producer, the logging client's producer (kafka-python on a thread, librdkafka in
its child process), the worker's and replay's loggers, topic creation. Validation happens
once, when the settings are turned into client options: an unknown protocol or mechanism,
SASL without a user or password, SASL or TLS options with a protocol that would not use
them, or a missing certificate file is a `UserError` naming the setting (never the password).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from driftline.errors import UserError

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_FILES = (("ssl_cafile", "kafka_ssl_cafile"), ("ssl_certfile", "kafka_ssl_certfile"),
          ("ssl_keyfile", "kafka_ssl_keyfile"))


@dataclass(frozen=True)
class KafkaSecurity:
    """The Kafka security settings (`Settings.kafka_*`); PLAINTEXT with nothing else by default."""

    protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    ssl_cafile: Path | None = None
    ssl_certfile: Path | None = None
    ssl_keyfile: Path | None = None

    @classmethod
    def from_settings(cls, settings: Any) -> "KafkaSecurity":
        password = settings.kafka_sasl_password
        return cls(protocol=settings.kafka_security_protocol, sasl_mechanism=settings.kafka_sasl_mechanism,
                   sasl_username=settings.kafka_sasl_username,
                   sasl_password=SecretStr(password) if isinstance(password, str) else password,
                   ssl_cafile=settings.kafka_ssl_cafile, ssl_certfile=settings.kafka_ssl_certfile,
                   ssl_keyfile=settings.kafka_ssl_keyfile)

    def checked(self) -> "KafkaSecurity":
        """Itself, once valid; else a UserError naming the setting."""
        protocol = (self.protocol or "").upper()
        if protocol not in PROTOCOLS:
            raise UserError(f"kafka_security_protocol must be one of {', '.join(PROTOCOLS)}, got {self.protocol!r}")
        sasl = protocol.startswith("SASL_")
        if sasl:
            if (self.sasl_mechanism or "").upper() not in MECHANISMS:
                raise UserError(f"kafka_sasl_mechanism must be one of {', '.join(MECHANISMS)} with "
                                f"kafka_security_protocol {protocol}, got {self.sasl_mechanism!r}")
            if not self.sasl_username:
                raise UserError(f"kafka_sasl_username is required with kafka_security_protocol {protocol}")
            if self.sasl_password is None or not self.sasl_password.get_secret_value():
                raise UserError(f"kafka_sasl_password is required with kafka_security_protocol {protocol}")
        else:
            for value, name in ((self.sasl_mechanism, "kafka_sasl_mechanism"),
                                (self.sasl_username, "kafka_sasl_username"),
                                (self.sasl_password, "kafka_sasl_password")):
                if value:
                    raise UserError(f"{name} is set but kafka_security_protocol is {protocol}, which does not "
                                    "use SASL: set it to SASL_SSL or SASL_PLAINTEXT")
        for attr, name in _FILES:
            path = getattr(self, attr)
            if path is None:
                continue
            if not protocol.endswith("SSL"):
                raise UserError(f"{name} is set but kafka_security_protocol is {protocol}, which does not use "
                                "TLS: set it to SSL or SASL_SSL")
            if not Path(path).is_file():
                raise UserError(f"{name}: no such file: {path}")
        return self

    @property
    def plaintext(self) -> bool:
        return (self.protocol or "").upper() == "PLAINTEXT"


def kafka_python_options(security: KafkaSecurity | None) -> dict[str, Any]:
    """kafka-python keyword arguments (KafkaProducer, KafkaConsumer, KafkaAdminClient); validated."""
    if security is None:
        return {}
    security = security.checked()
    protocol = security.protocol.upper()
    options: dict[str, Any] = {"security_protocol": protocol}
    if protocol.startswith("SASL_"):
        options.update(sasl_mechanism=security.sasl_mechanism.upper(), sasl_plain_username=security.sasl_username,
                       sasl_plain_password=security.sasl_password.get_secret_value())
    for attr, _name in _FILES:
        if getattr(security, attr) is not None:
            options[attr] = str(getattr(security, attr))
    return options


def librdkafka_config(security: KafkaSecurity | None) -> dict[str, Any]:
    """confluent-kafka (librdkafka) configuration properties; validated."""
    if security is None:
        return {}
    security = security.checked()
    protocol = security.protocol.upper()
    config: dict[str, Any] = {"security.protocol": protocol}
    if protocol.startswith("SASL_"):
        config.update({"sasl.mechanisms": security.sasl_mechanism.upper(), "sasl.username": security.sasl_username,
                       "sasl.password": security.sasl_password.get_secret_value()})
    for (attr, _name), key in zip(_FILES, ("ssl.ca.location", "ssl.certificate.location", "ssl.key.location")):
        if getattr(security, attr) is not None:
            config[key] = str(getattr(security, attr))
    return config
