"""task_wal: the Task DAGs of every session, each change durable in its WAL before it is acknowledged.

One consumer in batch mode reads the task stream; each batch is one group commit (see
:mod:`services.task_wal.handler`). The consumer publishes the replies and acknowledges the batch in
one pipelined round trip, replies first: a crash in between re-delivers the batch at the next start,
and the request ids recorded with the WAL keep it from applying twice.
"""

from __future__ import annotations

from agent_core.bus import GROUP_TASKS, Delivery
from agent_core.bus.contracts.tasks import TASK_MESSAGE, TaskMessage, TaskReply
from agent_core.files import open_file_store
from agent_core.service import ServiceContext, ServiceParts
from services.task_wal.handler import TaskWalHandler
from services.task_wal.location import Projects
from services.task_wal.objectwal import ObjectTaskStore
from services.task_wal.store import TaskStore

__all__ = ["MAX_BATCH", "build"]

MAX_BATCH = 256  # commands grouped under one fsync at most


async def build(ctx: ServiceContext) -> ServiceParts:
    """The task stream's consumer; lists are replayed lazily on first use."""
    in_store = ctx.settings.files.engine == "s3"
    store: TaskStore
    if in_store:  # every instance on every host reaches the lists; create-only PUTs fence them
        files = await open_file_store(ctx.settings)
        store = ObjectTaskStore(files)
    else:
        store = TaskStore(fsync=ctx.settings.tasks.fsync)
    # Lists only in the server's own folders: a session's workspace or a configured project root.
    projects = Projects(ctx.settings.home, ctx.settings.projects.roots, in_store=in_store)
    handler = TaskWalHandler(store, projects)

    async def on_batch(items: list[tuple[TaskMessage, Delivery]]) -> list[TaskReply]:
        return await handler.handle([message for message, _ in items])

    consumer = ctx.consumer(
        ctx.names.task_commands,
        GROUP_TASKS,
        TASK_MESSAGE,
        batch_handler=on_batch,
        options=ctx.default_options(batch=True, max_records=MAX_BATCH),
    )

    async def close() -> None:
        store.close()
        if isinstance(store, ObjectTaskStore):
            await store.files.close()

    if not ctx.settings.tasks.fsync and not in_store:
        ctx.log.warning("tasks.fsync is off: acknowledged task changes may be lost on power loss")
    return ServiceParts(consumers=[consumer], on_stop=[close])
