"""What each built-in provider kind needs to be reached: its key's variable and its address.

A ``[model]`` or ``[providers.<name>]`` names the kind (``openai``, ``anthropic``, ``ollama``);
unless it says otherwise (``api_key_env``, ``base_url``), the kind's own defaults apply:

======== ======================= =============================================================
kind     key read from           address
======== ======================= =============================================================
openai   ``OPENAI_API_KEY``      the OpenAI API (or ``base_url``: vLLM, LM Studio, llama.cpp…)
anthropic ``ANTHROPIC_API_KEY``  the Anthropic API
ollama   (none)                  ``http://127.0.0.1:11434`` (``DEFAULT_OLLAMA_URL``)
======== ======================= =============================================================

A hosted API (``openai`` or ``anthropic`` without a ``base_url``) cannot answer without its key,
so start-up refuses when that variable is unset (:func:`missing_keys`), naming it: the first
message would otherwise fail with an authentication error that points nowhere. A server of one's
own (a ``base_url``) may take no key at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from agent_core.config.schema import DEFAULT_KEY_ENV, Settings, key_env
from agent_core.errors import ConfigError

__all__ = [
    "DEFAULT_KEY_ENV",
    "MissingKey",
    "check_model_keys",
    "key_env",
    "missing_keys",
]

# Kinds whose default address is a hosted API, which refuses every request without a key.
_HOSTED: Final = frozenset(DEFAULT_KEY_ENV)


@dataclass(frozen=True, slots=True)
class MissingKey:
    """A configured provider whose key variable is unset although it needs one."""

    where: str  # the config key: ``model`` or ``providers.<name>``
    kind: str
    variable: str


def missing_keys(
    settings: Settings, env: Mapping[str, str], *, memory: bool = False
) -> list[MissingKey]:
    """The configured providers that need a key and have none in ``env``: the default model
    and every named provider (with ``memory``, the memory model instead)."""
    found: list[MissingKey] = []
    if memory:
        candidates = [("memory.model", settings.memory.model or settings.model)]
        named = []
    else:
        candidates = [("model", settings.model)]
        named = list(settings.providers.items())
    entries = [(where, m.provider, m.base_url, m.api_key_env) for where, m in candidates]
    entries += [(f"providers.{n}", p.kind, p.base_url, p.api_key_env) for n, p in named]
    for where, kind, base_url, api_key_env in entries:
        variable = key_env(kind, api_key_env)
        hosted = kind in _HOSTED and base_url is None
        if variable is not None and (hosted or api_key_env) and not env.get(variable):
            found.append(MissingKey(where, kind, variable))
    return found


def check_model_keys(
    settings: Settings, env: Mapping[str, str], *, default_model: bool = True
) -> None:
    """Raise ``ConfigError("model_key_missing")`` naming every variable that a configured
    provider needs and ``env`` lacks (see the module docstring); ``default_model=False`` checks
    the named providers only (the demo model stands in for the default one)."""
    missing = [m for m in missing_keys(settings, env) if default_model or m.where != "model"]
    if not missing:
        return
    said = "; ".join(
        f"{m.where} ({m.kind}) reads its key from {m.variable}, which is not set" for m in missing
    )
    raise ConfigError(
        "model_key_missing",
        f"{said}. Set it (export {missing[0].variable}=...), or name another variable with "
        f"api_key_env, or point base_url at a server of your own (docs/providers.md), "
        "or try the scripted demo model first: make demo",
        details={"variables": [m.variable for m in missing], "key": f"{missing[0].where}"},
    )
