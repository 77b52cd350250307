"""``[files]``: where session files live (docs/architecture.md, "Files").

``engine = "local"`` (the default) keeps today's layout under the home; ``"s3"`` keeps every
file in one bucket of an S3-compatible store, so that any host's gateway or worker reaches a
session's files. Credentials never live here: the S3 engine reads the standard AWS environment
(``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_ENDPOINT_URL``,
``AWS_REGION``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["FileStoreSettings", "S3Settings"]


class S3Settings(BaseModel):
    """``[files.s3]``: the bucket and, for a store other than AWS, its endpoint."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # S3's own rule for bucket names (3 to 63 lowercase letters, digits, dots and hyphens).
    bucket: str | None = Field(default=None, pattern=r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
    # http(s)://host:port of an S3-compatible store (MinIO, Ceph RGW, …); unset: AWS_ENDPOINT_URL,
    # else AWS's regional endpoint.
    endpoint_url: str | None = Field(default=None, pattern=r"^https?://[^\s/]+(/.*)?$")
    # unset: AWS_REGION, else us-east-1 (what S3-compatible stores accept).
    region: str | None = Field(default=None, pattern=r"^[a-z0-9-]{1,32}$")
    # Keys are written below this prefix (one bucket shared by several deployments).
    prefix: str = Field(default="", pattern=r"^([A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*)?$")


class FileStoreSettings(BaseModel):
    """``[files]``: the engine, and ``[files.s3]`` when it is ``"s3"``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    engine: Literal["local", "s3"] = "local"
    s3: S3Settings = S3Settings()

    @model_validator(mode="after")
    def _bucket_for_s3(self) -> FileStoreSettings:
        if self.engine == "s3" and self.s3.bucket is None:
            raise ValueError('engine = "s3" needs [files.s3] bucket')
        return self
