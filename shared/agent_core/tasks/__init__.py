"""Task DAG domain: state, rules, commands, WAL record codec and
replay, list file names. Pure logic: no clock, no randomness except sender-side ids, no file I/O
(that is ``services/task_wal``).

The models (Task, TaskDAG, WAL records: :mod:`agent_core.types.tasks`) and the commands (the
task stream contract: :mod:`agent_core.types.task_commands`) live with the types every layer
reads, below the bus that carries them, and are re-exported here. Modules: ``rules`` (``evolve``: the one place the DAG rules live), ``dag`` (``apply`` a command, derived
ready/blocked sets), ``codec`` (one WAL line), ``wal`` (``replay``), ``names`` (safe file names),
``errors``.
"""

from agent_core.tasks.codec import decode_record, encode_record, seal
from agent_core.tasks.dag import Applied, apply, blocked_ids, ready_ids
from agent_core.tasks.errors import TaskErrorCode, TaskRuleError, TaskWalCorruptError, WalFault
from agent_core.tasks.names import list_file_name, list_file_stem
from agent_core.tasks.rules import evolve
from agent_core.tasks.wal import ReplayResult, ReplayStatus, replay
from agent_core.types.task_commands import TASK_COMMAND, TaskCommand
from agent_core.types.tasks import Task, TaskDAG, TaskStatus, TaskWalEvent

__all__ = [
    "TASK_COMMAND",
    "Applied",
    "ReplayResult",
    "ReplayStatus",
    "Task",
    "TaskCommand",
    "TaskDAG",
    "TaskErrorCode",
    "TaskRuleError",
    "TaskStatus",
    "TaskWalCorruptError",
    "TaskWalEvent",
    "WalFault",
    "apply",
    "blocked_ids",
    "decode_record",
    "encode_record",
    "evolve",
    "list_file_name",
    "list_file_stem",
    "ready_ids",
    "replay",
    "seal",
]
