"""Opposites: "increase the limit" and "decrease the limit" embed almost alike.

verify() turns a pair down when one text has a listed word and the other its opposite
only, or when one side has an un-/dis- prefix the other lacks ("lock"/"unlock"). The list
holds base forms; inflect() adds the regular inflections, so "stopped" opposes "starting".
"""

import re

ANTONYMS = (  # base forms; inflect adds -s, -ed, -ing, -er, -est
    "increase/decrease reduce",
    "raise/lower",
    "more/less fewer",
    "most/least",
    "max maximum maximise maximize/min minimum minimise minimize",
    "buy bought purchase/sell sold",
    "enable/disable",
    "add append insert/remove delete",
    "create/delete destroy",
    "start begin began begun/stop end finish",
    "open/close shut",
    "include/exclude",
    "before/after",
    "above/below",
    "up/down",
    "on/off",
    "import/export",
    "upload/download",
    "upgrade/downgrade",
    "ascending asc/descending desc",
    "old/new",
    "early/late",
    "fast quick/slow",
    "cheap inexpensive/expensive",
    "gain win won/lose lost",
    "encrypt/decrypt",
    "encode/decode",
    "compress/decompress",
    "accept approve/decline reject refuse",
    "allow permit/deny block forbid",
    "pass succeed success/fail failure",
    "true/false",
    "positive/negative",
    "high/low",
    "big large/small little",
    "long tall/short",
    "hot warm/cold",
    "light/dark",
    "good/bad",
    "better/worse",
    "best/worst",
    "easy/hard difficult",
    "love/hate",
    "show/hide",
    "push/pull",
    "send/receive",
    "deposit/withdraw",
    "credit/debit",
    "profit/loss",
    "public/private",
    "internal/external",
    "sync synchronous/async asynchronous",
    "connect/disconnect",
    "valid/invalid",
    "correct/incorrect",
    "possible/impossible",
    "male men/female women",
    "north/south",
    "east/west",
    "remember/forget",
    "add plus/subtract minus",
    "hire/fire",
    "input/output",
    "raw uncooked/cooked",
    "in inside inbound login/out outside outbound logout",
    "near nearest closest/far farther farthest furthest",
    "backup/restore",
)


def inflect(word: str) -> set[str]:
    """Regular forms of a base word: stop -> stops, stopped, stopping; easy -> easier."""
    if len(word) < 3:
        return {word}
    stem = word[:-1] if word.endswith("e") else word
    if re.fullmatch(r"[^aeiou]*[aeiou][bdgmnprt]", word):  # stop -> stopp-, big -> bigg-
        stem = word + word[-1]
    forms = {word, word + "s", word + "es", stem + "ed", stem + "ing", stem + "er", stem + "est"}
    if word.endswith("y"):
        forms |= {word[:-1] + "ier", word[:-1] + "iest", word[:-1] + "ies"}
    return forms


def _opposite_of() -> dict[str, list[tuple[int, int]]]:
    """Every form of every listed word -> [(pair number, side 1 or 2)]."""
    opposite_of: dict[str, list[tuple[int, int]]] = {}
    for number, pair in enumerate(ANTONYMS):
        for bit, side in enumerate(pair.split("/"), 1):
            for form in {f for w in side.split() for f in inflect(w)}:
                opposite_of.setdefault(form, []).append((number, bit))
    return opposite_of


_OPPOSITE_OF = _opposite_of()


def opposed(q: set[str], c: set[str]) -> bool:
    """A word on one side only whose listed opposite is on the other side only: "at its
    closest" / "at its farthest", though "how far" is on both."""
    sides: list[dict[int, int]] = [{}, {}]  # pair number -> sides present (bits)
    for words, found in zip((q - c, c - q), sides, strict=True):
        for w in words:
            for number, bit in _OPPOSITE_OF.get(w, ()):
                found[number] = found.get(number, 0) | bit
    if any(sides[0][n] ^ sides[1][n] == 3 for n in sides[0].keys() & sides[1].keys()):
        return True
    for x, y in ((q, c), (c, q)):  # lock/unlock, like/dislike: a prefix on one side only
        for w in x - y:
            for prefix in ("un", "dis"):
                stem = w[len(prefix) :]
                if w.startswith(prefix) and len(stem) >= 4 and stem in y and stem not in x:
                    return True
    return False
