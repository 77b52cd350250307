"""The schema of ``${SOONG_AGENT_HOME}/config.toml``. Unknown keys are errors, never ignored."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "BusSettings",
    "GatewaySettings",
    "MemorySettings",
    "ModelSettings",
    "ObservabilitySettings",
    "RunWorkerSettings",
    "Settings",
    "StorageSettings",
    "TaskSettings",
]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BusSettings(_Section):
    """The Redis bus. ``redis_url=None`` means: ``soong-agent up`` starts an embedded Valkey."""

    redis_url: str | None = None
    namespace: str = Field(default="soong", pattern=r"^[a-z][a-z0-9_\-]{0,31}$")
    request_timeout_s: float = Field(default=10.0, gt=0)
    max_deliveries: int = Field(default=5, ge=1)
    min_idle_ms: int = Field(default=30_000, ge=100)
    claim_interval_s: float = Field(default=2.0, gt=0)


class GatewaySettings(_Section):
    """The HTTP gateway."""

    host: str = "127.0.0.1"
    port: int = Field(default=8720, ge=0, le=65535)
    max_body_bytes: int = Field(default=10 * 1024 * 1024, ge=1024)
    max_upload_bytes: int = Field(default=100 * 1024 * 1024, ge=1024)
    rate_limit_per_s: float = Field(default=50.0, gt=0)
    rate_limit_burst: int = Field(default=100, ge=1)
    max_sse_streams_per_key: int = Field(default=32, ge=1)


class StorageSettings(_Section):
    """The storage-writer. Durability pragmas are the writer's decision, not a setting."""

    db_path: Path | None = None
    batch_max: int = Field(default=256, ge=1, le=5000)
    json_artifact_threshold_bytes: int = Field(default=64 * 1024, ge=256)


class RunWorkerSettings(_Section):
    """Run-workers."""

    count: int = Field(default=2, ge=1, le=64)
    lease_ttl_ms: int = Field(default=10_000, ge=1000)
    # Lanes (sessions) one worker drains at once; runs mostly wait on models and tools.
    max_concurrent_runs: int = Field(default=64, ge=1)


class TaskSettings(_Section):
    """The task-wal service."""

    fsync: bool = True


class ModelSettings(_Section):
    """The default model of agents; ``api_key_env`` names the variable holding the key."""

    provider: str = "openai"
    name: str = "gpt-4o-mini"
    base_url: str | None = None
    api_key_env: str | None = "OPENAI_API_KEY"
    max_output_tokens: int = Field(default=4096, gt=0)
    timeout_s: float = Field(default=120.0, gt=0)


class MemorySettings(_Section):
    """Memory extraction; ``model`` falls back to the default model when unset."""

    enabled: bool = True
    debounce_s: float = Field(default=2.0, ge=0)
    model: ModelSettings | None = None


class ObservabilitySettings(_Section):
    """Logs, each process's ops port (health and metrics) and traces.

    ``ops_port``: ``None`` opens no ops port (``soong-agent up`` gives each process a free one);
    ``0`` takes any free port. Traces leave the process only when ``otlp_endpoint`` is set.
    """

    log_format: Literal["text", "json"] = "text"
    ops_host: str = "127.0.0.1"
    ops_port: int | None = Field(default=None, ge=0, le=65535)
    otlp_endpoint: str | None = Field(default=None, pattern=r"^https?://")
    trace_sample_ratio: float = Field(default=1.0, ge=0.0, le=1.0)


class Settings(_Section):
    """All settings of a deployment; built once at start-up and passed down."""

    home: Path
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    bus: BusSettings = BusSettings()
    gateway: GatewaySettings = GatewaySettings()
    storage: StorageSettings = StorageSettings()
    run_worker: RunWorkerSettings = RunWorkerSettings()
    tasks: TaskSettings = TaskSettings()
    model: ModelSettings = ModelSettings()
    memory: MemorySettings = MemorySettings()
    observability: ObservabilitySettings = ObservabilitySettings()

    @property
    def db_path(self) -> Path:
        """The SQLite file the storage-writer owns."""
        return self.storage.db_path or self.home / "sessions.sqlite"
