"""OpenAI's list pages (`after` cursor, `limit`, has_more), newest first, for a team's
files and batches."""

from typing import Any, TypeVar

from django.db.models import Model, Q, QuerySet

M = TypeVar("M", bound=Model)


class BadPage(ValueError):
    pass


def page(
    rows: "QuerySet[M]", after: str | None, limit_text: str | None, most: int
) -> tuple[list[M], bool]:
    """Up to `limit` rows after the row with id `after` (in rows), and whether more follow."""
    try:
        limit = int(limit_text) if limit_text is not None else min(20, most)
    except ValueError:
        raise BadPage(f"limit must be a whole number from 1 to {most}.") from None
    if not 1 <= limit <= most:
        raise BadPage(f"limit must be a whole number from 1 to {most}.")
    ordered = rows.order_by("-created_at", "-id")
    if after:
        cursor: Any = rows.filter(id=after).values("created_at", "id").first()
        if cursor is None:
            raise BadPage(f"after: no such id {after!r}.")
        ordered = ordered.filter(
            Q(created_at__lt=cursor["created_at"])
            | Q(created_at=cursor["created_at"], id__lt=cursor["id"])
        )
    found = list(ordered[: limit + 1])
    return found[:limit], len(found) > limit


def list_body(data: list[dict[str, Any]], has_more: bool) -> dict[str, Any]:
    return {
        "object": "list",
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": has_more,
    }
