"""Loading rule profiles: `--profile NAME` (a file of `conf/profiles/`) or `--config PATH` (any YAML)."""

from __future__ import annotations

from dataclasses import fields
from importlib import resources
from typing import Any

import yaml

from audit_rules.profile import AppSequenceSpec, Profile

DEFAULT_PROFILE = "kafka-3.4"


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
    """The named built-in profile, overlaid by a `--config` YAML file, then by the app-sequence options."""
    data: dict[str, Any] = {}
    base = name or DEFAULT_PROFILE
    if name is not None or config is None:
        path = resources.files("conf") / "profiles" / f"{base}.yaml"
        if not path.is_file():
            raise ProfileError(f"unknown profile {base!r} (one of {', '.join(available_profiles())})")
        data.update(_yaml(path.read_text(encoding="utf-8"), str(path)))
    if config is not None:
        try:
            with open(config, encoding="utf-8") as fh:
                text = fh.read()
        except OSError as exc:
            raise ProfileError(f"{config}: cannot read: {exc.strerror or exc}") from None
        overlay = _yaml(text, config)
        data.update(overlay.get("profile", overlay))
        extractor = overlay.get("app_sequence_extractor") or {}
        app_producer = app_producer or extractor.get("producer")
        app_sequence = app_sequence or extractor.get("sequence")
        app_sequence_scope = app_sequence_scope or extractor.get("scope")
    return _build(data, config or base, app_producer, app_sequence, app_sequence_scope)


def _yaml(text: str, where: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ProfileError(f"{where}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ProfileError(f"{where}: expected a mapping of profile settings")
    return data


def _build(
    data: dict[str, Any],
    where: str,
    app_producer: str | None,
    app_sequence: str | None,
    app_sequence_scope: str | None = None,
) -> Profile:
    known = {f.name for f in fields(Profile)} - {"app_sequence"}
    unknown = sorted(set(data) - known - {"app_sequence_extractor", "profile"})
    if unknown:
        raise ProfileError(f"{where}: unknown setting(s) {', '.join(unknown)}")
    values = {k: v for k, v in data.items() if k in known}
    if "compacted_topics" in values:
        values["compacted_topics"] = tuple(str(t) for t in values["compacted_topics"] or ())
    if "broker_line" in values:
        values["broker_line"] = str(values["broker_line"])
    if (app_producer is None) != (app_sequence is None):
        raise ProfileError("--app-producer and --app-sequence go together")
    if app_sequence_scope is not None and app_producer is None:
        raise ProfileError("an app-sequence scope needs --app-producer and --app-sequence")
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
