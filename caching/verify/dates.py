"""Dates and times as one string each: "5pm" == "17:00", "June 3" == "3rd of June".

"Meetings today" and "meetings tomorrow" embed almost alike, so verify() compares the
dates each text names. Clock times, digit dates, years and quarters are taken out of the
text by CLOCK before it is split into words (so "5pm" is not the number 5); month and
day words, and relative spans ("next week"), are recognised word by word in take_date.
"""

import re

_MONTH_NAMES = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]
_MONTHS = (
    {m: i for i, m in enumerate(_MONTH_NAMES, 1)}
    | {m[:3]: i for i, m in enumerate(_MONTH_NAMES, 1)}
    | {"sept": 9}
)
# Also ordinary words, so months only when capitalised ("May" not first: "May I...").
_CAPITALISED_MONTHS = frozenset({"may", "march", "sept"} | {m[:3] for m in _MONTH_NAMES})
_WEEKDAYS = [d + "day" for d in ("mon", "tues", "wednes", "thurs", "fri", "satur", "sun")]
_DATE_WORDS = (
    {
        w: w
        for w in [
            "today",
            "tonight",
            "tomorrow",
            "yesterday",
            "weekend",
            "morning",
            "afternoon",
            "evening",
            "night",
            "spring",
            "summer",
            "autumn",
            "winter",
            *_WEEKDAYS,
        ]
    }
    | {w + "s": w for w in [*_WEEKDAYS, "weekend", "morning", "evening"]}
    | {s + "time": s for s in ("spring", "summer", "winter")}
    | {"noon": "12:00", "midnight": "0:00"}
)
_SPANS = {"week", "weeks", "month", "months", "year", "years", "quarter"}  # after next/last
_RELATIVE = {
    "next": "next",
    "coming": "next",
    "last": "last",
    "past": "last",
    "previous": "last",
    "this": "",
}  # "this week" is "the week"
# Times and digit dates; "June 3" and "3rd of June" are joined at token level.
CLOCK = re.compile(
    r"\b(?=[\dQq])(?:(?P<h>\d{1,2})(?::(?P<mi>\d\d))?\s*(?P<ap>[aApP])\.?[mM]\b\.?"
    r"|(?P<h24>\d{1,2}):(?P<mi24>\d\d)\b|(?P<ymd>\d{1,4}[/-]\d{1,2}[/-]\d{1,4})\b"
    # A year unless a lower-case word follows: "in 2018" is a year, "2000 meters" is not;
    # nor a digit after a point or comma ("2018.5", "2018,000"), but "In 2018, ..." is one.
    r"|(?<![.,$])(?P<y>(?:19|20)\d\d)(?![\w%]|[.,]\d|\s+(?!(?:and|or|to|vs)\b)[a-z])"
    r"|[Qq](?P<q>[1-4])\b)"
)


def clock_value(m: re.Match[str]) -> str:
    """One string per time or digit date: 5pm and 17:00 are both "17:00"."""
    if m["h"]:
        return f"{int(m['h']) % 12 + (12 if m['ap'] in 'pP' else 0)}:{m['mi'] or '00'}"
    if m["h24"]:
        return f"{int(m['h24'])}:{m['mi24']}"
    return m["ymd"] or m["y"] or "q" + m["q"]


def is_day(word: str) -> bool:
    """Whether a word ("3", or "#3" for 3rd) can be a day of the month next to a month."""
    return word.lstrip("#").isdigit() and 1 <= int(word.lstrip("#")) <= 31


def take_date(raw: str, low: str, start: bool, words: list[str]) -> str | None:
    """The date `low` names, or None; words before it that belong to it ("next", "3rd of")
    are taken off `words`."""
    date = _DATE_WORDS.get(low)
    if low in _MONTHS and (
        low not in _CAPITALISED_MONTHS or (raw[0].isupper() and not (start and low == "may"))
    ):
        date = f"m{_MONTHS[low]}"
    relative = words[-1] if words and words[-1] in _RELATIVE else None
    if date is None and relative is not None and low in _SPANS:
        date = low.rstrip("s")  # "week" alone is a word, "next week" a date
    if date is None:
        return None
    if relative is not None:  # "next week", "last Monday", "this weekend"
        return f"{_RELATIVE[words.pop()]} {date}".lstrip()
    if date[0] == "m":  # "3 June", "3rd of June"
        k = 2 if words[-1:] == ["of"] else 1
        if len(words) >= k and is_day(words[-k]):
            date = f"{date}d{int(words[-k].lstrip('#'))}"
            del words[-k:]
    return date
