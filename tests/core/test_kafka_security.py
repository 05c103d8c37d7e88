"""Kafka security settings: the client options they become, their validation, and every client taking them.

No broker here speaks TLS or SASL, so these tests check the options each client is built
with, not a handshake. (A kafka-python client configured for TLS against the plaintext
embedded broker hangs in the TLS handshake past its bootstrap timeout; see docs/collector.md.)
"""
from __future__ import annotations

import pytest
from pydantic import SecretStr

from driftline.config import Settings
from driftline.errors import UserError
from driftline.kafka_security import KafkaSecurity, kafka_python_options, librdkafka_config

PASSWORD = "hunter2-do-not-print"


@pytest.fixture
def pem(tmp_path):
    path = tmp_path / "ca.pem"
    path.write_text("-----BEGIN CERTIFICATE-----\n")
    return path


def test_plaintext_adds_only_the_protocol():
    assert kafka_python_options(KafkaSecurity()) == {"security_protocol": "PLAINTEXT"}
    assert librdkafka_config(KafkaSecurity()) == {"security.protocol": "PLAINTEXT"}
    assert kafka_python_options(None) == {} and librdkafka_config(None) == {}


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "scram-sha-512"])
def test_sasl_options(protocol, mechanism):
    security = KafkaSecurity(protocol, mechanism, "svc", SecretStr(PASSWORD))
    assert kafka_python_options(security) == {"security_protocol": protocol, "sasl_mechanism": mechanism.upper(),
                                              "sasl_plain_username": "svc", "sasl_plain_password": PASSWORD}
    assert librdkafka_config(security) == {"security.protocol": protocol, "sasl.mechanisms": mechanism.upper(),
                                           "sasl.username": "svc", "sasl.password": PASSWORD}


def test_tls_files(pem):
    security = KafkaSecurity("ssl", ssl_cafile=pem, ssl_certfile=pem, ssl_keyfile=pem)
    assert kafka_python_options(security) == {"security_protocol": "SSL", "ssl_cafile": str(pem),
                                              "ssl_certfile": str(pem), "ssl_keyfile": str(pem)}
    assert librdkafka_config(security) == {"security.protocol": "SSL", "ssl.ca.location": str(pem),
                                           "ssl.certificate.location": str(pem), "ssl.key.location": str(pem)}


BAD = {
    "unknown protocol": (KafkaSecurity("TLS"), "kafka_security_protocol"),
    "unknown mechanism": (KafkaSecurity("SASL_SSL", "GSSAPI", "u", SecretStr(PASSWORD)), "kafka_sasl_mechanism"),
    "no user": (KafkaSecurity("SASL_SSL", "PLAIN", None, SecretStr(PASSWORD)), "kafka_sasl_username"),
    "no password": (KafkaSecurity("SASL_PLAINTEXT", "PLAIN", "u", None), "kafka_sasl_password"),
    "password without SASL": (KafkaSecurity("SSL", None, None, SecretStr(PASSWORD)), "kafka_sasl_password"),
    "missing file": (KafkaSecurity("SSL", ssl_cafile="/nonexistent/ca.pem"), "kafka_ssl_cafile"),
    "file without TLS": (KafkaSecurity("PLAINTEXT", ssl_keyfile="/nonexistent/k.pem"), "kafka_ssl_keyfile"),
}


@pytest.mark.parametrize("name", BAD)
@pytest.mark.parametrize("build", [kafka_python_options, librdkafka_config])
def test_invalid_settings_name_the_setting_never_the_password(name, build):
    security, setting = BAD[name]
    with pytest.raises(UserError) as raised:
        build(security)
    assert setting in str(raised.value)
    assert PASSWORD not in str(raised.value)


def test_from_settings_reads_every_field(pem):
    settings = Settings(kafka_security_protocol="SASL_SSL", kafka_sasl_mechanism="PLAIN", kafka_sasl_username="u",
                        kafka_sasl_password=PASSWORD, kafka_ssl_cafile=pem)
    assert kafka_python_options(KafkaSecurity.from_settings(settings)) == {
        "security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN", "sasl_plain_username": "u",
        "sasl_plain_password": PASSWORD, "ssl_cafile": str(pem)}
    assert PASSWORD not in repr(KafkaSecurity.from_settings(settings))


SASL = KafkaSecurity("SASL_PLAINTEXT", "PLAIN", "svc", SecretStr(PASSWORD))
EXPECTED = {"security_protocol": "SASL_PLAINTEXT", "sasl_plain_password": PASSWORD}


class _Spy:
    def __init__(self):
        self.calls: list[dict] = []
        self.args: list[tuple] = []

    def __call__(self, *args, **kwargs):
        self.calls.append(kwargs)
        self.args.append(args)
        raise _Built()


class _Built(Exception):
    pass


def _has_security(kwargs):
    return all(kwargs.get(k) == v for k, v in EXPECTED.items())


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_the_collector_consumer_and_dlq_producer_take_the_settings(monkeypatch, client):
    import kafka

    from driftline.collector import confluent_source, kafka_python_source
    from driftline.collector.config import CollectorConfig
    from driftline.collector.consumer import Collector

    consumer_spy, producer_spy = _Spy(), _Spy()
    monkeypatch.setattr(kafka_python_source, "KafkaConsumer", consumer_spy)
    monkeypatch.setattr(confluent_source, "Consumer", consumer_spy)
    monkeypatch.setattr(kafka, "KafkaProducer", producer_spy)
    runner = Collector(CollectorConfig("127.0.0.1:1", "sqlite://", security=SASL, kafka_client=client))
    runner._stop.set()  # _connect waits only this long after a failure
    assert runner._connect() is False
    with pytest.raises(_Built):
        runner.publisher._connect()
    built = consumer_spy.calls[0] if client == "kafka-python" else consumer_spy.args[0][0]
    assert _has_security(producer_spy.calls[0])
    assert (_has_security(built) if client == "kafka-python" else
            all(built.get(k) == v for k, v in librdkafka_config(SASL).items()))


def test_the_inference_logger_takes_the_settings_on_a_thread_and_in_its_child(monkeypatch):
    import kafka

    from driftline.client import InferenceLogger

    spy = _Spy()
    monkeypatch.setattr(kafka, "KafkaProducer", spy)
    logger = InferenceLogger("127.0.0.1:1", "m", "1", security=SASL)
    try:
        with pytest.raises(_Built):
            logger.sender._connect()
    finally:
        logger.sender.close(timeout_s=1) if hasattr(logger.sender, "close") else None
    assert _has_security(spy.calls[0])
    child = InferenceLogger.__new__(InferenceLogger)  # the child's librdkafka properties, without a child
    from driftline.client import logger as client_logger
    captured = {}
    monkeypatch.setattr(client_logger, "ProcessEventSender", lambda *a, **kw: captured.update(kw))
    InferenceLogger.__init__(child, "127.0.0.1:1", "m", "1", security=SASL, producer_process=True,
                             producer_config={"linger.ms": 1})
    assert captured["producer_config"]["sasl.password"] == PASSWORD
    assert captured["producer_config"]["security.protocol"] == "SASL_PLAINTEXT"
    assert captured["producer_config"]["linger.ms"] == 1


def test_the_label_listener_and_topic_creation_take_the_settings(monkeypatch):
    import kafka
    import kafka.admin

    from driftline.broker import create_topics
    from driftline.worker.retrain import LabelListener

    admin_spy, consumer_spy = _Spy(), _Spy()
    monkeypatch.setattr(kafka.admin, "KafkaAdminClient", admin_spy)
    with pytest.raises(_Built):
        create_topics("127.0.0.1:1", 1, security=SASL)
    assert _has_security(admin_spy.calls[0])
    listener = LabelListener("127.0.0.1:1", "m", None, SASL)

    def consumer(*args, **kwargs):  # the listener's loop ends after its first attempt
        listener._stop.set()
        return consumer_spy(*args, **kwargs)

    monkeypatch.setattr(kafka, "KafkaConsumer", consumer)
    listener._run()
    assert _has_security(consumer_spy.calls[0])
