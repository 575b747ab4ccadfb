"""OpenAI's list pages (`after` cursor, `limit`, has_more), newest first (files may ask for
oldest first): a team's files, batches and API keys. A list that grows without end
(revoked keys stay, for the audit) is never answered whole."""

from typing import Any, TypeVar

from django.db.models import Model, Q, QuerySet

M = TypeVar("M", bound=Model)


class BadPage(ValueError):
    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.param = param  # the query parameter at fault: "limit", "after" or "order"


def page(
    rows: "QuerySet[M]",
    after: str | None,
    limit_text: str | None,
    most: int,
    field: str = "id",
    order: str | None = None,
) -> tuple[list[M], bool]:
    """Up to `limit` rows after the row whose `field` (unique, the id a client sees) is
    `after` (in rows), and whether more follow; newest first unless `order` is "asc" (the
    lists whose OpenAI endpoint takes `order`: files)."""
    try:
        limit = int(limit_text) if limit_text is not None else min(20, most)
    except ValueError:
        raise BadPage(f"limit must be a whole number from 1 to {most}.", "limit") from None
    if not 1 <= limit <= most:
        raise BadPage(f"limit must be a whole number from 1 to {most}.", "limit")
    if order not in (None, "asc", "desc"):
        raise BadPage("order must be asc or desc.", "order")
    sign, beyond = ("", "gt") if order == "asc" else ("-", "lt")
    ordered = rows.order_by(f"{sign}created_at", f"{sign}{field}")
    if after:
        cursor: Any = rows.filter(**{field: after}).values("created_at", field).first()
        if cursor is None:
            raise BadPage(f"after: no such id {after!r}.", "after")
        ordered = ordered.filter(
            Q(**{f"created_at__{beyond}": cursor["created_at"]})
            | Q(created_at=cursor["created_at"], **{f"{field}__{beyond}": cursor[field]})
        )
    found = list(ordered[: limit + 1])
    return found[:limit], len(found) > limit


def list_body(data: list[dict[str, Any]], has_more: bool, field: str = "id") -> dict[str, Any]:
    return {
        "object": "list",
        "data": data,
        "first_id": data[0][field] if data else None,
        "last_id": data[-1][field] if data else None,
        "has_more": has_more,
    }
