"""task_wal: Task DAGs in memory per (session, list), every change appended to its WAL first."""

__all__: list[str] = []
