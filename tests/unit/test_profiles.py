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
    """2.5+ keeps the state (KIP-360); 2.4 keeps it until it expires (KAFKA-7190); 1.0-2.3 forget it
    and answer UNKNOWN_PRODUCER_ID, 0.11 OUT_OF_ORDER_SEQUENCE_NUMBER, to a sequence other than 0."""
    assert "keeps a producer's state" in _retained_state(load_profile("kafka-2.5"))
    assert "keeps a producer's state" in _retained_state(load_profile("kafka-3.4"))
    for name, error in (("kafka-1.0", "UNKNOWN_PRODUCER_ID"), ("kafka-0.11", "OUT_OF_ORDER_SEQUENCE_NUMBER")):
        text = _retained_state(load_profile(name))
        assert "forgets a producer" in text and error in text, text
    text = _retained_state(load_profile("kafka-2.4"))
    assert "keeps a producer's state" in text and "KAFKA-7190" in text and "UNKNOWN_PRODUCER_ID" in text, text


def test_releases_of_the_1_0_line_differ_in_eviction_and_marker_expiry(tmp_path: Path) -> None:
    """1.0-2.3 evict at the log start and time expiry from data batches; kafka-2.4 (2.4.1) does
    neither; a config sets either for the 1.0 line, and no other line takes a value it contradicts."""
    old, new = load_profile("kafka-1.0"), load_profile("kafka-2.4")
    assert (old.evicts_at_log_start, old.markers_refresh_expiry) == (True, False)
    assert (new.evicts_at_log_start, new.markers_refresh_expiry) == (False, True)
    assert new.accepts_unknown_producer is False and new.unknown_producer_error == "UNKNOWN_PRODUCER_ID"
    assert (
        load_profile("kafka-0.11").evicts_at_log_start and load_profile("kafka-0.11").markers_refresh_expiry
    )
    assert not load_profile("kafka-3.4").evicts_at_log_start
    two_four_oh = load_profile("kafka-2.4", config(tmp_path, "marker_refreshes_expiry: false\n"))
    assert (two_four_oh.evicts_at_log_start, two_four_oh.markers_refresh_expiry) == (False, False)
    with pytest.raises(ProfileError, match=r"log_start_evicts true does not hold for broker_line 3\.4"):
        load_profile("kafka-3.4", config(tmp_path, "log_start_evicts: true\n"))
    with pytest.raises(
        ProfileError, match=r"marker_refreshes_expiry false does not hold for broker_line 0\.11"
    ):
        load_profile("kafka-0.11", config(tmp_path, "marker_refreshes_expiry: false\n"))
    # Saying what the line does anyway is no error.
    assert load_profile("kafka-2.5", config(tmp_path, "log_start_evicts: false\n")).name == "kafka-2.5"


def test_a_release_setting_must_be_a_boolean_and_the_delete_horizon_not_negative(tmp_path: Path) -> None:
    """A quoted "false" would read as true: refused, naming the setting; so is a negative horizon."""
    with pytest.raises(ProfileError, match="log_start_evicts must be true or false, not 'false'"):
        load_profile("kafka-1.0", config(tmp_path, 'log_start_evicts: "false"\n'))
    with pytest.raises(ProfileError, match="delete_retention_ms must be >= 0"):
        load_profile("kafka-1.0", config(tmp_path, "delete_retention_ms: -1\n"))
    assert load_profile("kafka-1.0").delete_retention_ms == 86_400_000


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # Scalars where mappings or lists belong, and values of the wrong type: one line, exit 2.
        ("app_sequence_extractor: header:x\n", r"app_sequence_extractor must be a mapping"),
        ("app_sequence_extractor: {producer: 5, sequence: 'header:s'}\n", r"producer must be a string"),
        (
            "app_sequence_extractor: {producer: 'header:a', sequenc: 'header:s'}\n",
            r"unknown key\(s\) sequenc",
        ),
        ("compacted_topics: my-compacted-topic\n", r"compacted_topics must be a list"),
        ("duplicate_window_batches: '10'\n", r"duplicate_window_batches must be a whole number"),
        ("producer_id_expiration_ms: true\n", r"producer_id_expiration_ms must be a whole number"),
        ("profile: [kafka-2.5]\n", r"profile must be a built-in profile's name or a mapping"),
        ("profile: kafka-9.9\n", r"unknown profile 'kafka-9\.9'"),
        # Settings beside a `profile:` mapping were dropped unread.
        ("profile: {broker_line: '2.5'}\nduplicate_window_batches: 1000\n", r"beside the `profile:` mapping"),
        ("profile: {bogus_key: 1}\n", r"unknown setting\(s\) bogus_key"),
        # Quoted inside the findings' format_string patterns: `%-r` failed the audit with a Java error.
        ("name: prod-50%-retention\n", r"name must not hold '%'"),
        # A key YAML reads as a number or a boolean failed sorting or joining the unknown keys: a
        # TypeError traceback and exit 3.
        ("1: 2\n", r"key 1 is not a setting's name \(a int\)"),
        ("profile: {1: 2}\n", r"key 1 is not a setting's name"),
        ("app_sequence_extractor: {7: x, producer: 'header:a'}\n", r"key 7 is not a setting's name"),
        ("on: 3\n", r"key True is not a setting's name \(a bool\)"),
    ],
)
def test_a_config_of_the_wrong_shape_is_a_usage_error_naming_the_file(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(ProfileError, match=r"audit\.yaml: .*" + message):
        load_profile(config=config(tmp_path, text))


def test_invalid_yaml_is_one_line_naming_its_place(tmp_path: Path) -> None:
    """Contract §2: a one-line reason. The parser's own message spans three lines (with a caret)."""
    with pytest.raises(ProfileError) as caught:
        load_profile(config=config(tmp_path, "a: b\n  c: d\n"))
    assert str(caught.value).endswith(
        "audit.yaml: not valid YAML at line 2, column 4: mapping values are not allowed here"
    )
    assert "\n" not in str(caught.value)


def test_the_kafka_names_of_settings_are_accepted(tmp_path: Path) -> None:
    """Contract §1 names the config's settings as the broker does (`producer.id.expiration.ms`); they
    were refused as unknown settings."""
    top = load_profile(
        config=config(tmp_path, "producer.id.expiration.ms: 3600000\ndelete.retention.ms: 5\n")
    )
    assert (top.producer_id_expiration_ms, top.delete_retention_ms) == (3_600_000, 5)
    nested = load_profile(config=config(tmp_path, "profile:\n  transaction.max.timeout.ms: 60000\n"))
    assert nested.transaction_max_timeout_ms == 60_000
    with pytest.raises(
        ProfileError, match=r"both producer\.id\.expiration\.ms and producer_id_expiration_ms"
    ):
        load_profile(config=config(tmp_path, "producer.id.expiration.ms: 1\nproducer_id_expiration_ms: 2\n"))


def test_before_3_4_the_producer_id_expiry_is_transactional_id_expiration_ms(tmp_path: Path) -> None:
    """Brokers before KIP-854 (3.4) expired producer ids after transactional.id.expiration.ms, the name
    the messages give on those lines: the config takes it there, and refuses it on 3.4 (where it
    expires transactional ids, not producer ids)."""
    old = load_profile(
        config=config(tmp_path, "profile: kafka-2.5\ntransactional.id.expiration.ms: 3600000\n")
    )
    assert (old.broker_line, old.producer_id_expiration_ms, old.expiration_setting) == (
        "2.5",
        3_600_000,
        "transactional.id.expiration.ms",
    )
    with pytest.raises(
        ProfileError, match=r"only before 3\.4 \(KIP-854\): give producer\.id\.expiration\.ms"
    ):
        load_profile(config=config(tmp_path, "transactional.id.expiration.ms: 3600000\n"))


def test_a_config_that_is_not_utf8_is_a_usage_error_naming_the_byte(tmp_path: Path) -> None:
    path = tmp_path / "audit.yaml"
    path.write_bytes(b"duplicate_window_batches: 5\n# caf\xe9\n")
    with pytest.raises(ProfileError, match=r"audit\.yaml: byte 33: not UTF-8"):
        load_profile(config=str(path))


def test_a_config_names_its_base_profile_and_adds_compacted_topics(tmp_path: Path) -> None:
    profile = load_profile(config=config(tmp_path, "profile: kafka-2.5\ncompacted_topics: [orders]\n"))
    assert (profile.name, profile.broker_line, profile.producer_id_expiration_ms) == (
        "kafka-2.5",
        "2.5",
        604800000,
    )
    # The internal topics stay compacted beside the file's, and beside none.
    assert profile.compacted_topics == ("__consumer_offsets", "__transaction_state", "orders")
    empty = load_profile(config=config(tmp_path, "compacted_topics:\n"))
    assert "__consumer_offsets" in empty.compacted_topics
    with pytest.raises(ProfileError, match=r"profile 'kafka-2\.5' and --profile kafka-1\.0 disagree"):
        load_profile("kafka-1.0", config(tmp_path, "profile: kafka-2.5\n"))
    # A nested mapping is read whole, the extractor beside it too.
    nested = load_profile(
        config=config(
            tmp_path,
            "profile: {duplicate_window_batches: 1000}\n"
            "app_sequence_extractor: {producer: 'header:a', sequence: 'header:s'}\n",
        )
    )
    assert nested.duplicate_window_batches == 1000
    assert nested.app_sequence is not None and nested.app_sequence.producer == "header:a"


def test_a_config_that_moves_the_broker_line_names_the_profile_after_it(tmp_path: Path) -> None:
    """The reports and the findings' messages name the profile: not `kafka-3.4` for a 2.5 line."""
    assert load_profile(config=config(tmp_path, "broker_line: '2.5'\n")).name == "kafka-3.4, broker line 2.5"
    assert load_profile(config=config(tmp_path, "broker_line: 2.5\nname: mine\n")).name == "mine"
    assert load_profile(config=config(tmp_path, "duplicate_window_batches: 9\n")).name == "kafka-3.4"
