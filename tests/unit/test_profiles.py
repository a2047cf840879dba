"""Loading the app-sequence extractor and its scope from the options and from a `--config` file."""

from __future__ import annotations

from pathlib import Path

import pytest

from audit_rules.retention import _retained_state
from jobs.profiles import ProfileError, load_profile


def config(tmp_path: Path, text: str) -> str:
    path = tmp_path / "audit.yaml"
    path.write_text(text)
    return str(path)


def test_the_scope_defaults_to_auto_and_the_option_sets_it() -> None:
    spec = load_profile(app_producer="header:app", app_sequence="header:seq").app_sequence
    assert spec is not None and spec.scope == "auto"
    spec = load_profile(
        app_producer="header:app", app_sequence="header:seq", app_sequence_scope="topic"
    ).app_sequence
    assert spec is not None and spec.scope == "topic"


def test_the_config_file_sets_the_scope_and_the_option_overrides_it(tmp_path: Path) -> None:
    path = config(
        tmp_path,
        "app_sequence_extractor:\n  producer: header:app\n  sequence: json:seq\n  scope: partition\n",
    )
    spec = load_profile(config=path).app_sequence
    assert spec is not None and (spec.producer, spec.sequence, spec.scope) == (
        "header:app",
        "json:seq",
        "partition",
    )
    spec = load_profile(config=path, app_sequence_scope="topic").app_sequence
    assert spec is not None and spec.scope == "topic"


def test_an_unknown_scope_names_the_file_and_the_choices(tmp_path: Path) -> None:
    path = config(
        tmp_path, "app_sequence_extractor: {producer: 'header:a', sequence: 'header:s', scope: sideways}\n"
    )
    with pytest.raises(ProfileError, match=r"audit\.yaml.*'sideways'.*auto, partition, topic"):
        load_profile(config=path)


def test_a_scope_without_an_extractor_is_a_usage_error() -> None:
    with pytest.raises(ProfileError, match="needs --app-producer and --app-sequence"):
        load_profile(app_sequence_scope="topic")


def test_what_a_broker_does_with_a_producer_retention_deleted_follows_its_line() -> None:
    """2.5+ keeps the state (KIP-360); 1.0-2.4 forget it and answer UNKNOWN_PRODUCER_ID, 0.11
    OUT_OF_ORDER_SEQUENCE_NUMBER, to a sequence other than 0."""
    assert "keeps a producer's state" in _retained_state(load_profile("kafka-2.5"))
    assert "keeps a producer's state" in _retained_state(load_profile("kafka-3.4"))
    for name, error in (("kafka-1.0", "UNKNOWN_PRODUCER_ID"), ("kafka-0.11", "OUT_OF_ORDER_SEQUENCE_NUMBER")):
        text = _retained_state(load_profile(name))
        assert "forgets a producer" in text and error in text, text
