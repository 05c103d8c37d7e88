"""`driftline up --scenario rag_topic_shift`'s configuration: the stand-in's cache hits mapped to its chat model, and
a chat model's latency objectives, written beside the user's settings and read back as the stages read them."""
from __future__ import annotations

from driftline.commands.up_rag import rag_config
from driftline.config import load_settings
from driftline.latency_slo import LatencySLO
from driftline.llm_settings import LlmSettings
from driftline.otlp.rag_standin import ANSWERING_MODEL, MODEL, SERVICE


def test_the_scenario_config_maps_the_service_and_sets_chat_objectives(tmp_path):
    own = tmp_path / "mine.toml"
    own.write_text('window_seconds = 30\n')
    path = rag_config(load_settings(own, home=str(tmp_path)))
    settings = load_settings(path)
    assert settings.window_seconds == 30  # the user's settings stay
    mapped = LlmSettings.from_mapping(settings.section("llm")).models[SERVICE]
    assert (mapped.model, mapped.version) == (MODEL, ANSWERING_MODEL)
    assert LatencySLO.from_mapping(settings.section("latency"), model=MODEL).p99_ms == 3000.0
    own.write_text('[llm]\nrefusal_patterns = []\n')  # the user's own [llm]: left as it is
    assert rag_config(load_settings(own, home=str(tmp_path))) == own
