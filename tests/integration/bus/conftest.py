"""Every bus test runs twice: consumers read by FastStream's subscriber, and by the direct loop
(``ConsumerOptions.direct``) the streams on a turn's path use."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.bus import helpers


@pytest.fixture(autouse=True, params=["faststream", "direct"])
def reader(request: pytest.FixtureRequest) -> Iterator[str]:
    """The reader of this test's consumers."""
    helpers.DIRECT = request.param == "direct"
    yield str(request.param)
    helpers.DIRECT = False
