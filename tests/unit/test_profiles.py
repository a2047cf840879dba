"""Loading the app-sequence extractor and its scope from the options and from a `--config` file."""

from __future__ import annotations

from pathlib import Path

import pytest

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
