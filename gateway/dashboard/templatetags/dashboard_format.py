"""Formatting filters for the dashboard: money is stored in integer micro-dollars."""

from decimal import Decimal

from django import template

register = template.Library()


@register.filter
def usd(micros: int | float | None) -> str:
    """Dollars and cents; an amount under a cent keeps four decimals, so a little usage at
    small per-token prices reads $0.0041 rather than a misleading $0.00."""
    if micros is None:
        return "-"
    if 0 < abs(micros) < 10_000:
        return f"${micros / 1_000_000:,.4f}"
    return f"${micros / 1_000_000:,.2f}"


@register.filter
def price(usd: Decimal | None) -> str:
    """A price in USD as entered (four decimals at most), with at least cents: $0.15,
    $0.075, $2.4999; a discounted price keeps its fraction of a cent rather than rounding."""
    if usd is None:
        return "-"
    text = f"{usd.quantize(Decimal('0.0001')):,.4f}".rstrip("0")
    whole, _, cents = text.partition(".")
    return f"${whole}.{cents.ljust(2, '0')}"


@register.filter
def ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f} ms"


@register.filter
def percent(share: float | None) -> str:
    return "-" if share is None else f"{share:.1%}"


@register.filter
def key(mapping: dict[str, object], name: str) -> object:
    return mapping.get(name)
