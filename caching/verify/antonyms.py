"""Opposites: "increase the limit" and "decrease the limit" embed almost alike.

verify() turns a pair down when a word only one text has is opposed by a listed word only
the other has ("at its closest" / "at its farthest", though "how far" is on both), when
one side has an un-/dis- prefix the other lacks ("lock"/"unlock"), or when the same verb
takes opposite particles ("zoom in"/"zoom out", "turn on"/"turn off": only after the verbs
listed, since "in" and "out" alone are everywhere). The list holds base forms; inflect()
adds the regular inflections, so "stopped" opposes "starting".
"""

import itertools
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
    "inside inbound login/outside outbound logout",
    "near nearer nearest closer closest/far farther farthest furthest",
    "backup/restore",
    "front/rear",
    "greater/less lesser",
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


# Particles opposed only after these verbs: "in" and "out" alone are everywhere ("find out
# how it works in simple terms"), "zoom in" and "zoom out" are opposites.
_PARTICLE_VERBS = {
    form
    for verb in ("log", "sign", "zoom", "check", "opt", "clock", "plug", "turn", "switch")
    for form in inflect(verb)
}
_OPPOSITE_PARTICLE = {"in": "out", "out": "in", "on": "off", "off": "on"}


def particles_opposed(q: list[str], c: list[str]) -> bool:
    """The same verb with opposite particles, one on each side only: "turn on dark mode on
    Slack" / "turn off dark mode on Slack", "zoom in" / "zoom out"."""

    def phrases(seq: list[str]) -> set[tuple[str, str]]:
        return {
            (verb, particle)
            for verb, particle in itertools.pairwise(seq)
            if verb in _PARTICLE_VERBS and particle in _OPPOSITE_PARTICLE
        }

    mine, theirs = phrases(q), phrases(c)
    return any((v, _OPPOSITE_PARTICLE[p]) in theirs - mine for v, p in mine - theirs)


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
