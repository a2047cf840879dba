"""Loading rule profiles: `--profile NAME` (a file of `conf/profiles/`) or `--config PATH` (any YAML)."""

from __future__ import annotations

from dataclasses import fields
from importlib import resources
from typing import Any

import yaml

from audit_rules.profile import AppSequenceSpec, Profile

DEFAULT_PROFILE = "kafka-3.4"


# The settings that are whole numbers (`duplicate_window_sequences` may be null).
_INTEGERS = frozenset(
    {
        "duplicate_window_batches",
        "duplicate_window_sequences",
        "producer_id_expiration_ms",
        "transaction_max_timeout_ms",
        "delete_retention_ms",
    }
)


class ProfileError(ValueError):
    """A profile that cannot be used (exit status 2)."""


def available_profiles() -> list[str]:
    folder = resources.files("conf") / "profiles"
    return sorted(p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml"))


def load_profile(
    name: str | None = None,
    config: str | None = None,
    *,
    app_producer: str | None = None,
    app_sequence: str | None = None,
    app_sequence_scope: str | None = None,
) -> Profile:
    """The named built-in profile, overlaid by a `--config` YAML file, then by the app-sequence options.

    The file holds the settings at its top level, or under `profile:` as a mapping; `profile: NAME`
    names the built-in profile it overlays (as `--profile` does; the two must agree). Where the file
    moves the broker line and does not set `name`, the name says so (`kafka-3.4, broker line 2.5`). Its
    `compacted_topics` add to the base profile's (Kafka's internal topics are compacted whatever the
    file says)."""
    data: dict[str, Any] = {}
    base = name or DEFAULT_PROFILE
    overlay: dict[str, Any] = {}
    if config is not None:
        try:
            with open(config, encoding="utf-8") as fh:
                text = fh.read()
        except OSError as exc:
            raise ProfileError(f"{config}: cannot read: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            raise ProfileError(f"{config}: byte {exc.start}: not UTF-8 text") from None
        overlay = _overlay(_yaml(text, config), config, name)
        if isinstance(overlay.get("profile"), str):
            base = overlay.pop("profile")
            try:
                data.update(_builtin(base))
            except ProfileError as exc:
                raise ProfileError(f"{config}: {exc}") from None
    if not data:
        data.update(_builtin(base))
    if config is not None:
        before = data.get("broker_line")
        base_topics = list(data.get("compacted_topics") or [])
        data.update(overlay)
        topics = overlay.get("compacted_topics")
        if topics is None and "compacted_topics" in overlay:
            topics = []  # an empty setting adds none
        if isinstance(topics, list):
            data["compacted_topics"] = [*base_topics, *(t for t in topics if t not in base_topics)]
        if "name" not in overlay and "broker_line" in overlay and str(overlay["broker_line"]) != str(before):
            # Not a built-in profile's name: its other settings are the base's.
            data["name"] = f"{data.get('name', base)}, broker line {overlay['broker_line']}"
        extractor = data.pop("app_sequence_extractor", None)
        if extractor is not None and not isinstance(extractor, dict):
            raise ProfileError(
                f"{config}: app_sequence_extractor must be a mapping {{producer: SPEC, sequence: SPEC, "
                f"scope: auto}}, not {extractor!r}"
            )
        extractor = extractor or {}
        unknown = sorted(set(extractor) - {"producer", "sequence", "scope"})
        if unknown:
            raise ProfileError(f"{config}: app_sequence_extractor: unknown key(s) {', '.join(unknown)}")
        app_producer = app_producer or extractor.get("producer")
        app_sequence = app_sequence or extractor.get("sequence")
        app_sequence_scope = app_sequence_scope or extractor.get("scope")
    return _build(data, config or base, app_producer, app_sequence, app_sequence_scope)


def _builtin(name: str) -> dict[str, Any]:
    path = resources.files("conf") / "profiles" / f"{name}.yaml"
    if not path.is_file():
        raise ProfileError(f"unknown profile {name!r} (one of {', '.join(available_profiles())})")
    return _yaml(path.read_text(encoding="utf-8"), str(path))


def _overlay(overlay: dict[str, Any], where: str, name: str | None) -> dict[str, Any]:
    """A `--config` file's settings: its top level, or its `profile:` mapping (beside which only
    `app_sequence_extractor` may stand); `profile: NAME` stays, naming the base profile."""
    nested = overlay.get("profile")
    if isinstance(nested, str):
        if name is not None and name != nested:
            raise ProfileError(f"{where}: profile {nested!r} and --profile {name} disagree")
        return overlay
    if isinstance(nested, dict):
        beside = sorted(set(overlay) - {"profile", "app_sequence_extractor"})
        if beside:
            raise ProfileError(
                f"{where}: setting(s) {', '.join(beside)} beside the `profile:` mapping (put them in it)"
            )
        merged = _kafka_names(dict(nested), where)
        if "app_sequence_extractor" in overlay:
            if "app_sequence_extractor" in merged:
                raise ProfileError(f"{where}: app_sequence_extractor both in and beside `profile:`")
            merged["app_sequence_extractor"] = overlay["app_sequence_extractor"]
        if isinstance(merged.get("profile"), str | dict):
            raise ProfileError(f"{where}: `profile:` inside `profile:`")
        return merged
    if "profile" in overlay:
        raise ProfileError(
            f"{where}: profile must be a built-in profile's name or a mapping of settings, not {nested!r}"
        )
    return overlay


def _yaml(text: str, where: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        # One line (contract §2): the parser's message spans several, with a caret under the column.
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ProfileError(f"{where}: not valid YAML{at}: {problem}") from None
    if not isinstance(data, dict):
        raise ProfileError(f"{where}: expected a mapping of profile settings")
    _names_only(data, where)
    return _kafka_names(data, where)


def _names_only(value: Any, where: str) -> None:
    """Every mapping's keys are names: YAML reads `1:` as a number and `on:` as true, which no setting
    is called (and which the messages listing unknown keys could not sort or join)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ProfileError(f"{where}: key {key!r} is not a setting's name (a {type(key).__name__})")
            _names_only(item, where)
    elif isinstance(value, list):
        for item in value:
            _names_only(item, where)


def _kafka_names(data: dict[str, Any], where: str) -> dict[str, Any]:
    """`data` with the broker's and topic's own names of settings (contract §1 names them so:
    `producer.id.expiration.ms`, ...) taken as ours."""
    for kafka_name, setting in KAFKA_NAMES.items():
        if kafka_name in data:
            if setting in data:
                raise ProfileError(f"{where}: both {kafka_name} and {setting}: give one")
            data[setting] = data.pop(kafka_name)
    return data


# Kafka's names of the profile's settings, accepted beside ours. Before 3.4 (KIP-854) the broker expired
# producer ids after transactional.id.expiration.ms (`LogManager`'s maxPidExpirationMs): that name is
# the setting for those broker lines only (`_build` checks), as the messages name it there.
_BEFORE_KIP_854 = "_transactional_id_expiration_ms"
KAFKA_NAMES = {
    "producer.id.expiration.ms": "producer_id_expiration_ms",
    "transactional.id.expiration.ms": _BEFORE_KIP_854,
    "transaction.max.timeout.ms": "transaction_max_timeout_ms",
    "delete.retention.ms": "delete_retention_ms",
}


def _build(
    data: dict[str, Any],
    where: str,
    app_producer: str | None,
    app_sequence: str | None,
    app_sequence_scope: str | None = None,
) -> Profile:
    if _BEFORE_KIP_854 in data:
        if str(data.get("broker_line", "3.4")) == "3.4":
            raise ProfileError(
                f"{where}: transactional.id.expiration.ms expires producer ids only before 3.4 (KIP-854): "
                "give producer.id.expiration.ms for broker line 3.4"
            )
        data["producer_id_expiration_ms"] = data.pop(_BEFORE_KIP_854)
    known = {f.name for f in fields(Profile)} - {"app_sequence"}
    unknown = sorted(set(data) - known - {"app_sequence_extractor", "profile"})
    if unknown:
        raise ProfileError(f"{where}: unknown setting(s) {', '.join(unknown)}")
    values = {k: v for k, v in data.items() if k in known}
    if "compacted_topics" in values:
        topics = values["compacted_topics"] or []
        if not isinstance(topics, list) or not all(isinstance(t, str | int) for t in topics):
            raise ProfileError(f"{where}: compacted_topics must be a list of topic names, not {topics!r}")
        values["compacted_topics"] = tuple(str(t) for t in topics)
    for setting in _INTEGERS & set(values):
        value = values[setting]
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise ProfileError(f"{where}: {setting} must be a whole number, not {value!r}")
    for setting in ("broker_line", "name"):
        if setting in values:
            if not isinstance(values[setting], str | int | float):
                raise ProfileError(f"{where}: {setting} must be a string, not {values[setting]!r}")
            values[setting] = str(values[setting])
    if "%" in values.get("name", ""):
        # The findings' messages quote the name inside Spark format_string patterns.
        raise ProfileError(f"{where}: name must not hold '%', not {values['name']!r}")
    if (app_producer is None) != (app_sequence is None):
        raise ProfileError("--app-producer and --app-sequence go together")
    if app_sequence_scope is not None and app_producer is None:
        raise ProfileError("an app-sequence scope needs --app-producer and --app-sequence")
    for option, spec in (
        ("producer", app_producer),
        ("sequence", app_sequence),
        ("scope", app_sequence_scope),
    ):
        if spec is not None and not isinstance(spec, str):
            raise ProfileError(f"{where}: the app-sequence {option} must be a string, not {spec!r}")
    try:
        app = None
        if app_producer is not None and app_sequence is not None:
            app = AppSequenceSpec(
                AppSequenceSpec.check(app_producer),
                AppSequenceSpec.check(app_sequence),
                str(app_sequence_scope or "auto"),
            )
        return Profile(**values, app_sequence=app)
    except (TypeError, ValueError) as exc:
        raise ProfileError(f"{where}: {exc}") from None
