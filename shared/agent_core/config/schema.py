"""The schema of ``${SOONG_AGENT_HOME}/config.toml``. Unknown keys are errors, never ignored."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agent_core.config.bus import BusTlsSettings, Topology, check_topology
from agent_core.config.command_tools import TOOL_NAME, CommandToolSettings
from agent_core.config.files import FileStoreSettings
from agent_core.config.hooks import HooksSettings
from agent_core.config.hosts import parse_host_entry
from agent_core.config.mcp import McpSettings

__all__ = [
    "DEFAULT_KEY_ENV",
    "BudgetSettings",
    "BusSettings",
    "CommandToolSettings",
    "GatewaySettings",
    "HooksSettings",
    "McpSettings",
    "MemorySettings",
    "ModelSettings",
    "NamedProviderSettings",
    "ObservabilitySettings",
    "PluginSettings",
    "ProjectSettings",
    "RunWorkerSettings",
    "SandboxSettings",
    "Settings",
    "SkillSettings",
    "StorageSettings",
    "TaskSettings",
    "key_env",
]


# The variable each built-in provider kind reads its key from, unless ``api_key_env`` names
# another (``agent_core.config.providers`` says more).
DEFAULT_KEY_ENV: Final[Mapping[str, str]] = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
}


def key_env(kind: str, api_key_env: str | None) -> str | None:
    """The variable a provider of ``kind`` reads its key from: ``api_key_env`` when set, else
    the kind's own (``None``: it takes no key)."""
    return api_key_env or DEFAULT_KEY_ENV.get(kind)


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BusSettings(_Section):
    """The Redis bus. ``redis_url=None`` means: ``soong-agent up`` starts an embedded Valkey.

    ``topology``: one node (``standalone``), a primary found through ``sentinels`` under the name
    ``sentinel_master`` (``sentinel``; the URL then gives the scheme, password and database
    only), or a ``cluster`` (the URL names any node). ``rediss://`` speaks TLS, with the CA and
    client certificate of ``[bus.tls]``; ``unix://`` reaches one node on this host by its socket.
    """

    redis_url: str | None = None
    namespace: str = Field(default="soong", pattern=r"^[a-z][a-z0-9_\-]{0,31}$")
    request_timeout_s: float = Field(default=10.0, gt=0)
    max_deliveries: int = Field(default=5, ge=1)
    min_idle_ms: int = Field(default=30_000, ge=100)
    claim_interval_s: float = Field(default=2.0, gt=0)
    topology: Topology = "standalone"
    sentinels: list[str] = Field(default_factory=list)
    sentinel_master: str | None = None
    tls: BusTlsSettings = Field(default_factory=BusTlsSettings)

    @field_validator("redis_url")
    @classmethod
    def _resp_url(cls, url: str | None) -> str | None:
        if url is not None and not (
            re.fullmatch(r"rediss?://[^\s/]+\S*", url)
            or re.fullmatch(r"unix://([^\s/@]*@)?/\S+", url)
        ):
            raise ValueError(
                "must be a redis:// or rediss:// (TLS) URL, redis[s]://[:password@]host[:port][/db], "
                "or a unix socket's, unix://[:password@]/path/to/socket[?db=n]"
            )
        return url

    @model_validator(mode="after")
    def _fits_together(self) -> BusSettings:
        check_topology(
            self.redis_url, self.topology, self.sentinels, self.sentinel_master, self.tls
        )
        return self


class GatewaySettings(_Section):
    """The HTTP gateway."""

    host: str = "127.0.0.1"
    port: int = Field(default=8720, ge=0, le=65535)
    max_body_bytes: int = Field(default=10 * 1024 * 1024, ge=1024)
    max_upload_bytes: int = Field(default=100 * 1024 * 1024, ge=1024)
    rate_limit_per_s: float = Field(default=50.0, gt=0)
    rate_limit_burst: int = Field(default=100, ge=1)
    max_sse_streams_per_key: int = Field(default=32, ge=1)
    # Requests with a missing or wrong key per client address and minute, past which it gets 429.
    auth_failures_per_minute: int = Field(default=100, ge=1)
    # The web console at /console (static files; the API is the same with it off).
    console: bool = True


class StorageSettings(_Section):
    """The storage-writer. Durability pragmas are the writer's decision, not a setting."""

    db_path: Path | None = None
    # A standby writer waits for the database's lock instead of refusing to start: started,
    # connected and ready to take over the moment the writer holding the lock dies.
    standby: bool = False
    batch_max: int = Field(default=256, ge=1, le=5000)
    json_artifact_threshold_bytes: int = Field(default=64 * 1024, ge=256)
    # Where the writer keeps the record: SQLite files in the home (the embedded default) or a
    # PostgreSQL server (15 or later) named by the environment's SOONG_POSTGRES_DSN, never here:
    # a DSN may carry a password. libpq's PG* variables fill in what the DSN leaves out.
    backend: Literal["sqlite", "postgres"] = "sqlite"
    # Logical partitions of the sessions (PostgreSQL): each owned by one writer at a time, so
    # several writers share them; every process routes commands by it (BusNames).
    partitions: int = Field(default=1, ge=1, le=256)

    @model_validator(mode="after")
    def _partitions_need_postgres(self) -> StorageSettings:
        if self.partitions > 1 and self.backend != "postgres":
            raise ValueError(
                f'partitions = {self.partitions} needs backend = "postgres": SQLite has one '
                "writer and one partition (set partitions = 1)"
            )
        return self


class RunWorkerSettings(_Section):
    """Run-workers."""

    count: int = Field(default=2, ge=1, le=64)
    # A lane's lease, renewed every quarter of it while its worker lives: a lost worker is
    # noticed (its lane taken over) within the TTL plus a sweep interval (a quarter of it too).
    lease_ttl_ms: int = Field(default=2_000, ge=1000)
    # Leases are renewed from a thread of their own, so a loop busy with CPU work keeps them; a
    # loop that has not turned for this long is stuck, and its leases are left to lapse.
    loop_stall_limit_s: float = Field(default=30.0, ge=1)
    # Lanes (sessions) one worker drains at once; runs mostly wait on models and tools.
    max_concurrent_runs: int = Field(default=64, ge=1)
    # Attempts at one run: a run taken over this many times (its worker lost each time) ends
    # ``failed`` / ``attempts_exhausted`` instead of being tried again.
    max_attempts: int = Field(default=3, ge=1, le=100)
    # How long a permission request waits for a decision before it is denied (the model is told).
    permission_timeout_s: float = Field(default=600.0, gt=0)
    # Accepted runs the bus lost (a failover, a gateway that died mid-submit) are queued again
    # from the storage-writer's record once untouched this long; one worker looks every interval.
    stranded_after_s: float = Field(default=60.0, ge=1)
    reconcile_interval_s: float = Field(default=30.0, gt=0)


class TaskSettings(_Section):
    """The task-wal service."""

    fsync: bool = True


# The kinds of attachment a model can take as content (see ``agent_core/provider/media.py``).
AcceptedKind = Literal["image", "pdf"]


class ModelSettings(_Section):
    """The default model of agents; ``api_key_env`` names the variable holding the key (unset:
    the provider kind's own, ``agent_core.config.providers``). ``accepts``: the kinds of
    attachment the model takes as content (``[]``: none, e.g. a model without vision; unset: its
    provider kind's default, ``provider.media.default_accepts``)."""

    provider: str = "openai"
    name: str = "gpt-4o-mini"
    base_url: str | None = None
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    max_output_tokens: int = Field(default=4096, gt=0)
    # The model's context window (None: the known default for the model's name).
    context_window: int | None = Field(default=None, ge=1024)
    timeout_s: float = Field(default=120.0, gt=0)
    accepts: tuple[AcceptedKind, ...] | None = None


class NamedProviderSettings(_Section):
    """One model endpoint an agent can pick by name (``[providers.<name>]``).

    ``kind``: the provider registry key that speaks to it (``openai`` for any OpenAI-compatible
    server such as vLLM or llama.cpp, ``anthropic``, ``ollama``, or a plug-in's key);
    ``models``: the model names agents may ask of it (empty: any), the first being the default
    unless ``default_model`` says otherwise; ``max_output_tokens``: its output limit;
    ``accepts``: as ``[model] accepts``, for its models.
    """

    kind: str = Field(min_length=1, max_length=64)
    base_url: str | None = Field(default=None, pattern=r"^https?://")
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    models: tuple[Annotated[str, Field(min_length=1, max_length=200)], ...] = ()
    default_model: str | None = Field(default=None, min_length=1, max_length=200)
    max_output_tokens: int = Field(default=4096, gt=0)
    # Its models' context window (None: the known default of the model's name).
    context_window: int | None = Field(default=None, ge=1024)
    accepts: tuple[AcceptedKind, ...] | None = None

    @model_validator(mode="after")
    def _a_default_model(self) -> NamedProviderSettings:
        if self.default_model is None and not self.models:
            raise ValueError("name its models, or a default_model")
        if self.default_model is not None and self.models and self.default_model not in self.models:
            raise ValueError(f"default_model {self.default_model!r} is not one of its models")
        return self

    @property
    def model(self) -> str:
        """The model an agent gets when it names none."""
        return self.default_model or self.models[0]


class MemorySettings(_Section):
    """Memory extraction; ``model`` falls back to the default model when unset.

    ``render_cache_s``: a run-worker reuses the memory text it rendered for an account and a set
    of skills for this long (0: renders it for every run). Memory changes reach runs that start
    at most this much later — the same scale as ``debounce_s``, by which extraction waits anyway.
    """

    enabled: bool = True
    debounce_s: float = Field(default=2.0, ge=0)
    render_cache_s: float = Field(default=2.0, ge=0, le=60)
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


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


class SandboxSettings(_Section):
    """Where agent code runs (``run_python``, ``run_command``) and its limits.

    ``mode = "bwrap"``: a bubblewrap sandbox per call; where it cannot run, the code tools are not
    offered and the worker says why at start-up. ``mode = "off"``: code runs as the worker's user
    with every account's files in reach — only for a single-user machine, and logged loudly.
    ``network = true``: the host's whole network. ``allowed_hosts`` (with ``network = false``):
    only these, through the worker's proxy — ``name``, ``*.domain`` (its subdomains), each with
    an optional ``:port`` (80 and 443 without one); see ``docs/architecture.md``, "Walls".
    ``env``: the only variables code gets besides PATH, HOME, TMPDIR and the locale.
    """

    mode: Literal["bwrap", "off"] = "bwrap"
    network: bool = False
    allowed_hosts: tuple[str, ...] = ()
    run_command: bool = False
    python: str = Field(default="python3", min_length=1)
    shell: str = Field(default="/bin/sh", min_length=1)
    read_only_paths: tuple[Path, ...] = ()
    env: dict[str, str] = Field(default_factory=dict)
    timeout_s: float = Field(default=60.0, gt=0, le=3600)
    cpu_s: int | None = Field(default=None, ge=1)
    memory_mb: int = Field(default=2048, ge=64)
    max_processes: int = Field(default=64, ge=4)
    file_size_mb: int = Field(default=256, ge=1)
    write_quota_mb: int = Field(default=1024, ge=1)
    min_free_disk_mb: int = Field(default=256, ge=0)
    tmp_mb: int = Field(default=64, ge=1)
    output_cap_kb: int = Field(default=256, ge=4)
    nice: int = Field(default=10, ge=0, le=19)

    @model_validator(mode="after")
    def _env_names(self) -> SandboxSettings:
        for name in self.env:
            if not _ENV_NAME.match(name):
                raise ValueError(f"sandbox.env: {name!r} is not a variable name")
            if name.startswith("SOONG_"):
                raise ValueError(f"sandbox.env: {name} is the service's own; code never gets it")
        if self.network and self.allowed_hosts:
            raise ValueError(
                "sandbox.allowed_hosts lists hosts, but network = true opens every host: choose one"
            )
        for entry in self.allowed_hosts:
            try:
                parse_host_entry(entry)
            except ValueError as exc:
                raise ValueError(f"sandbox.allowed_hosts: {exc}") from exc
        return self


_PROJECT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_\-]{0,31}$")


class ProjectSettings(_Section):
    """Project roots sessions may name (``name = "/absolute/folder"``); see
    ``agent_core/tools/projects.py``. A session without one works in its own workspace."""

    roots: dict[str, Path] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _roots(self) -> ProjectSettings:
        for name, path in self.roots.items():
            if not _PROJECT_NAME.match(name) or name == "workspace":
                raise ValueError(f"projects.roots: {name!r} is not a usable project name")
            if not path.is_absolute():
                raise ValueError(f"projects.roots.{name}: {path} is not an absolute path")
        return self


class SkillSettings(_Section):
    """Skills (``SKILL.md`` folders; see ``agent_core/skills``). ``dirs``: the operator's skill
    folders, searched before the account's and the project's, the first listed winning a name
    collision. ``enabled = false`` turns skills off for every session."""

    enabled: bool = True
    dirs: tuple[Path, ...] = ()

    @model_validator(mode="after")
    def _absolute(self) -> SkillSettings:
        for path in self.dirs:
            if not path.is_absolute():
                raise ValueError(f"skills.dirs: {path} is not an absolute path")
        return self


class BudgetSettings(_Section):
    """Token budgets of accounts (``[budgets]``): ``tokens`` for every account (none: no cap),
    ``accounts`` an account's own (``acct_x = 2000000``; ``0`` stops its runs), counted over
    ``period`` — the UTC ``day`` or ``month`` the runs ended in, or ``total`` — as input plus
    output tokens of the runs that ended. A run of an account whose budget is used up ends
    ``failed`` / ``budget_exhausted`` (see docs/architecture.md, "Usage totals and budgets")."""

    period: Literal["day", "month", "total"] = "month"
    tokens: int | None = Field(default=None, ge=0)
    accounts: dict[
        Annotated[str, Field(min_length=1, max_length=128)], Annotated[int, Field(ge=0)]
    ] = Field(default_factory=dict)

    def tokens_for(self, account_id: str) -> int | None:
        """The account's budget in tokens per period, ``None`` when it has none."""
        return self.accounts.get(account_id, self.tokens)


# ``package.module:attribute`` (an entry point's value).
_FACTORY = r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$"


class PluginSettings(_Section):
    """Plug-in tools and providers (see ``agent_core/plugins.py``). ``entry_points``: load the
    installed packages' ``soong_agent.tools`` / ``soong_agent.providers`` entry points;
    ``tools``: tool factories by ``module:attribute``; ``providers``: provider key → factory."""

    entry_points: bool = True
    tools: tuple[Annotated[str, Field(pattern=_FACTORY)], ...] = ()
    providers: dict[
        Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]{0,31}$")],
        Annotated[str, Field(pattern=_FACTORY)],
    ] = Field(default_factory=dict)


class Settings(_Section):
    """All settings of a deployment; built once at start-up and passed down."""

    home: Path
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    # Debug mode: a run ended by an unexpected exception keeps its traceback (redacted) as an
    # artifact of its session, named by its failure; logs keep tracebacks (redacted). Never in
    # an API response either way.
    debug: bool = False
    bus: BusSettings = BusSettings()
    gateway: GatewaySettings = GatewaySettings()
    storage: StorageSettings = StorageSettings()
    files: FileStoreSettings = FileStoreSettings()
    run_worker: RunWorkerSettings = RunWorkerSettings()
    tasks: TaskSettings = TaskSettings()
    model: ModelSettings = ModelSettings()
    memory: MemorySettings = MemorySettings()
    observability: ObservabilitySettings = ObservabilitySettings()
    sandbox: SandboxSettings = SandboxSettings()
    projects: ProjectSettings = ProjectSettings()
    skills: SkillSettings = SkillSettings()
    plugins: PluginSettings = PluginSettings()
    # Named model endpoints beside the default ``[model]``; an agent picks one with
    # ``agent_config.provider = "<name>"``.
    providers: dict[
        Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]{0,31}$")], NamedProviderSettings
    ] = Field(default_factory=dict)
    # Command hooks: the operator's, and which project roots may add their own (README, "Hooks").
    hooks: HooksSettings = HooksSettings()
    # MCP servers ([mcp.servers.<name>], see agent_core/config/mcp.py): their tools for agents.
    mcp: McpSettings = McpSettings()
    # Command tools ([tools.<name>], see agent_core/config/command_tools.py): JSON in, JSON out.
    tools: dict[str, CommandToolSettings] = Field(default_factory=dict)

    @field_validator("tools")
    @classmethod
    def _tool_names(cls, tools: dict[str, CommandToolSettings]) -> dict[str, CommandToolSettings]:
        for name in tools:
            if not TOOL_NAME.match(name):
                raise ValueError(f"{name!r}: a tool name is 1 to 64 letters, digits, '_' or '-'")
            if name.startswith("mcp__"):
                raise ValueError(f"{name}: names starting with mcp__ are MCP servers' tools")
        return tools

    budgets: BudgetSettings = BudgetSettings()

    @model_validator(mode="after")
    def _no_key_for_code(self) -> Settings:
        models = [self.model, *([self.memory.model] if self.memory.model else [])]
        keys = {key_env(m.provider, m.api_key_env) for m in models}
        keys |= {key_env(p.kind, p.api_key_env) for p in self.providers.values()}
        for key in sorted(k for k in keys if k):
            if key in self.sandbox.env:
                raise ValueError(f"sandbox.env: {key} holds a provider key; code never gets it")
        return self

    @property
    def db_path(self) -> Path:
        """The SQLite file the storage-writer owns."""
        return self.storage.db_path or self.home / "sessions.sqlite"
