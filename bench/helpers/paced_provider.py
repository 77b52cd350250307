"""A fake OpenAI provider that streams like a model does: text chunks at a steady pace.

Run as a process by ``bench/gateway.py`` (``python bench/helpers/paced_provider.py CHUNKS
INTERVAL_MS``): every request is answered with ``CHUNKS`` text deltas of a few words,
``INTERVAL_MS`` apart, over the real Chat Completions streaming protocol (``tests/fakes/openai_server.py``). Prints its SDK
base URL on the first line of stdout, then serves until killed.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "shared")]

from tests.fakes.openai_server import FakeOpenAIServer  # noqa: E402
from tests.fakes.script import Delay, Finish, ScriptedTurn, Step, Text, Usage  # noqa: E402


def paced_turn(chunks: int, interval_s: float) -> ScriptedTurn:
    """``chunks`` text deltas, ``interval_s`` apart, then usage and the stop reason."""
    steps: list[Step] = []
    for i in range(chunks):
        if i:
            steps.append(Delay(seconds=interval_s))
        steps.append(Text(text=f"chunk {i} of a steadily streamed answer. "))
    steps += [Usage(input_tokens=20, output_tokens=chunks * 8), Finish(reason="end_turn")]
    return ScriptedTurn(steps=steps)


def main() -> None:
    chunks, interval_ms = int(sys.argv[1]), float(sys.argv[2])
    turn = paced_turn(chunks, interval_ms / 1000)

    def answer(_request: Any) -> ScriptedTurn:
        return turn

    server = FakeOpenAIServer(default=answer)
    server.start_in_thread()
    print(server.sdk_base_url, flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
