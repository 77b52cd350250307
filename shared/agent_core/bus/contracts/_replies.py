"""What typed command results and query replies share: the base of a result, and reading a reply.

On the wire a receipt's ``result`` and a reply's ``data`` stay plain JSON (the writer stores
results as JSON, readers of old receipts read them back as they are); each command declares
beside itself the model of its result (``<Command>.result_of``) and each query the type of its
data (``<Query>.reply_of``), so senders get typed objects and never index a dict.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, Self, TypeAlias, TypeVar

from pydantic import BaseModel, TypeAdapter

from agent_core.bus.contracts._base import BusMessage
from agent_core.bus.contracts.refusals import RefusalCode
from agent_core.errors import StorageError

if TYPE_CHECKING:
    from agent_core.bus.contracts.storage import CommandReceipt, QueryReply

__all__ = ["CommandResult", "ResultType", "TypedQuery", "many", "one", "refused_error", "wire"]

_M = TypeVar("_M", bound=BaseModel)
_R_co = TypeVar("_R_co", covariant=True)


class TypedQuery(Protocol[_R_co]):
    """A storage query that declares the type of its reply's data (every ``StorageQuery``)."""

    def reply_of(self, reply: QueryReply) -> _R_co:
        """The reply's data, typed; ``None`` when nothing visible matched (for a lookup); a
        failed read raises :class:`StorageError`."""
        ...


def refused_error(receipt: CommandReceipt) -> StorageError:
    """The typed :class:`StorageError` of a refused receipt."""
    err = receipt.error
    if err is None:
        return StorageError(RefusalCode.COMMAND_REFUSED, "the writer refused the command")
    return StorageError(err.code, err.message, retryable=err.retryable, details=err.details)


class CommandResult(BusMessage):
    """Base of a command's result: what the writer allocated or read for it.

    The writer sends :func:`wire` of it: exactly the fields it set, so a result that has no
    ``session_config`` (say) has no such key, as before results were typed.
    """

    @classmethod
    def of(cls, receipt: CommandReceipt) -> Self:
        """The typed result of an applied command; a refused one raises its
        :class:`StorageError` (a result that does not match the model: ``ValidationError``)."""
        if not receipt.ok:
            raise refused_error(receipt)
        return cls.model_validate(receipt.result)


# A command's ``result_type``, named at module level: inside a command's body ``type`` is its
# ``type`` field.
ResultType: TypeAlias = type[CommandResult]


def wire(result: CommandResult) -> dict[str, Any]:
    """A result as the receipt carries it: JSON values, only the fields the writer set."""
    return result.model_dump(mode="json", exclude_unset=True)


_LISTS: dict[type[BaseModel], TypeAdapter[Any]] = {}


def _list_of(model: type[_M]) -> TypeAdapter[list[_M]]:
    found = _LISTS.get(model)
    if found is None:
        found = _LISTS[model] = TypeAdapter(list[model])  # type: ignore[valid-type]
    return found


def _data(reply: QueryReply) -> Any:
    if not reply.ok:
        err = reply.error
        raise StorageError(
            err.code if err else "query_failed",
            err.message if err else "storage query failed",
            retryable=bool(err and err.retryable),
        )
    return reply.data


def one(model: type[_M], reply: QueryReply) -> _M | None:
    """A reply's data as one ``model`` (``None``: nothing visible matched); a failed read
    raises :class:`StorageError`."""
    data = _data(reply)
    return None if data is None else model.model_validate(data)


def many(model: type[_M], reply: QueryReply) -> list[_M] | None:
    """A reply's data as a list of ``model`` (``None``: nothing visible matched); a failed read
    raises :class:`StorageError`."""
    data = _data(reply)
    return None if data is None else _list_of(model).validate_python(data)
