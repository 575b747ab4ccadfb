"""Swapped roles: "USD to EUR" and "EUR to USD" share every word, and embed alike.

verify() turns a pair down when a word a direction word points at (from, to, than, by,
over) is bound differently on the two sides, or when names and numbers appear in the
opposite order without a symmetric joiner between them ("Alice owes Bob" vs "Bob owes
Alice", but not "Alice and Bob" vs "Bob and Alice"; a year and a name are no two parties).
"""

_DIRECTION = {
    "from": "from",
    "to": "to",
    "into": "to",
    "onto": "to",
    "towards": "to",
    "toward": "to",
    "than": "than",
    "by": "by",
    "over": "over",
}
_FILLER = {
    "the",
    "a",
    "an",
    "my",
    "your",
    "his",
    "her",
    "its",
    "our",
    "their",
    "this",
    "that",
    "these",
    "those",
    "some",
}
_SYMMETRIC = {"and", "or", "vs", "versus", "v", "nor", "between", "plus", "times"}


def _bindings(seq: list[str]) -> dict[str, set[str]]:
    """The word each direction word points at: "from my laptop to the server" ->
    {laptop: {from}, server: {to}}."""
    bound: dict[str, set[str]] = {}
    for i, w in enumerate(seq):
        if w in _DIRECTION:
            head = next((h for h in seq[i + 1 : i + 4] if h not in _FILLER), None)
            if head is not None:
                bound.setdefault(head, set()).add(_DIRECTION[w])
    return bound


class _Order:
    """First positions of words, and a running count of the words that break symmetry, so
    that each pair check is O(1): verification stays linear in the text, plus the pairs of
    at most MAX_ANCHORS anchors (verdict.py), never cubic as repeated list.index was."""

    def __init__(self, seq: list[str], anchors: set[str]) -> None:
        self.first: dict[str, int] = {}
        self.breaking = [0]  # breaking[i]: words before position i that are not symmetric
        for i, w in enumerate(seq):
            self.first.setdefault(w, i)
            joins = w in anchors or w in _FILLER or w in _SYMMETRIC
            self.breaking.append(self.breaking[-1] + (0 if joins else 1))

    def before(self, x: str, y: str) -> bool:
        return self.first[x] < self.first[y]

    def symmetric(self, x: str, y: str) -> bool:
        """x and y joined by "and", "vs", "between"...: their order carries no role."""
        lo, hi = sorted((self.first[x], self.first[y]))
        return self.breaking[hi] - self.breaking[lo + 1] == 0


def swapped(q: list[str], c: list[str], anchors: set[str]) -> bool:
    """The two word sequences give a shared word, or a pair of anchors (names and
    numbers), different roles."""
    oq, oc = _Order(q, anchors), _Order(c, anchors)
    bq, bc = _bindings(q), _bindings(c)
    if any(not bq[w] & bc[w] for w in bq.keys() & bc.keys()):
        return True  # "from Paris" on one side, "to Paris" on the other
    for direction in {d for ds in bq.values() for d in ds}:  # "X to Y" vs "Y to X"
        only_q = [w for w, ds in bq.items() if direction in ds and direction not in bc.get(w, ())]
        only_c = [w for w, ds in bc.items() if direction in ds and direction not in bq.get(w, ())]
        if any(
            x in oc.first and y in oq.first and oq.before(x, y) != oc.before(x, y)
            for x in only_q
            for y in only_c
        ):
            return True
    # names and numbers in the opposite order and not joined symmetrically: "Alice owes
    # Bob", "subtract 5 from 12", "gate 12 in terminal B". A year and a name are not two
    # parties to swap: "2024 tax filing deadline in Canada" / "the deadline in Canada for the
    # 2024 tax year".
    shared = sorted(a for a in anchors if a in oq.first and a in oc.first)
    return any(
        not _a_year_and_a_name(x, y)
        and oq.before(x, y) != oc.before(x, y)
        and not oq.symmetric(x, y)
        and not oc.symmetric(x, y)
        for i, x in enumerate(shared)
        for y in shared[i + 1 :]
    )


def _a_year_and_a_name(x: str, y: str) -> bool:
    return _is_year(x) != _is_year(y) and (x[0] not in "=#" or y[0] not in "=#")


def _is_year(anchor: str) -> bool:
    return anchor[0] == "=" and anchor[1:].isdigit() and 1900 <= int(anchor[1:]) <= 2099
