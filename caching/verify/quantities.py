"""Numbers and units as values: "5" == "five", "two dozen" == 24, 20 kg != 20 lb.

Embeddings barely tell one number from another, so verify() compares the values the
texts name. Each run of number words or digits collapses to one "=value" token (ordinals
to "#n"), and the units are canonicalised, so a paraphrase that spells a number out still
matches while a changed quantity does not.
"""

CARDINAL = {
    w: float(i)
    for i, w in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
        ]
    )
} | {
    w: float(i * 10)
    for i, w in enumerate(
        ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"], 2
    )
}
_TIMES = {"hundred": 100.0, "dozen": 12.0}  # multiply what came before: "two dozen" = 24
_SCALE = {"thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12}
_NUMBER_WORDS = CARDINAL.keys() | _TIMES.keys() | _SCALE.keys()
_ALONE = {
    "half": "=0.5",
    "quarter": "=0.25",
    "quarters": "=0.25",
    "twice": "=2",
    "double": "=2",
    "triple": "=3",
    "thrice": "=3",
    "single": "=1",
} | {
    w: f"#{i}"
    for i, w in enumerate(
        [
            "first",
            "second",
            "third",
            "fourth",
            "fifth",
            "sixth",
            "seventh",
            "eighth",
            "ninth",
            "tenth",
        ],
        1,
    )
}
# Units change the answer (20 kg vs 20 lb). These count anywhere; AFTER_NUMBER words are
# too common for that and count only right after a number ("5 points", "two sentences").
UNIT = {
    w: canon
    for canon, words in {
        "kg": "kg kgs kilo kilos kilogram kilograms",
        "g": "gram grams",
        "lb": "lb lbs pound pounds",
        "oz": "oz ounce ounces",
        "l": "liter liters litre litres",
        "cup": "cup cups",
        "ml": "ml milliliter milliliters millilitre millilitres",
        "pint": "pint pints",
        "tbsp": "tbsp tablespoon tablespoons",
        "tsp": "tsp teaspoon teaspoons",
        "gb": "gb gigabyte",
        "gallon": "gallon gallons",
        "km": "km kilometer kilometers kilometre kilometres",
        "mile": "mile miles",
        "m": "meter meters metre metres",
        "cm": "cm centimeter centimeters centimetre centimetres",
        "mm": "mm millimeter millimeters millimetre millimetres",
        "yd": "yd",
        "ft": "ft feet",
        "inch": "inch inches",
        "px": "px pixel pixels",
        "mb": "mb megabyte",
        "kcal": "kcal calorie calories",
    }.items()
    for w in words.split()
}
AFTER_NUMBER = {
    w + s: w
    for w in [
        "point",
        "pt",
        "sentence",
        "paragraph",
        "page",
        "word",
        "minute",
        "hour",
        "day",
        "week",
        "month",
        "year",
    ]
    for s in ("", "s")
} | {  # units whose names are common words or letters: only right after a number ("5 m")
    "foot": "ft",
    "yard": "yd",
    "yards": "yd",
    "m": "m",
    "g": "g",
    "mi": "mile",
}


def _number_word(words: list[str], j: int, first: bool) -> bool:
    """Whether words[j] continues a number: "twenty five", "five hundred and two"."""
    w, prev = words[j], words[j - 1] if j else ""
    if w in _TIMES or w in _SCALE:
        return True
    if w == "and":  # only between a scale and a number: "hundred and five", not "2 and 3"
        following = words[j + 1] if j + 1 < len(words) else ""
        return (prev in _TIMES or prev in _SCALE) and following in CARDINAL
    if prev == "and" and j >= 2:
        prev = words[j - 2]
    if w not in CARDINAL:
        return first and w[0].isdigit()
    return (
        first
        or prev in _TIMES
        or prev in _SCALE
        or (CARDINAL.get(prev, 0) >= 20 and CARDINAL[w] < 10)
    )


def collapse_numbers(words: list[str]) -> list[str]:
    """Each run of number words or digits becomes one "=value" ("two dozen" -> "=24").
    "one" alone stays a word: it mostly means "a" ("sort by one key")."""
    out: list[str] = []
    i = 0
    while i < len(words):
        j, total, current = i, 0.0, 0.0
        if words[i] in _NUMBER_WORDS or words[i][0].isdigit():
            while j < len(words) and _number_word(words, j, j == i):
                w = words[j]
                if w in _TIMES:
                    current = (current or 1.0) * _TIMES[w]
                elif w in _SCALE:
                    total, current = total + (current or 1.0) * _SCALE[w], 0.0
                elif w != "and":
                    current += CARDINAL[w] if w in CARDINAL else float(w)
                j += 1
        if j == i or (j == i + 1 and words[i] == "one"):
            out.append(_ALONE.get(words[i], words[i]))
            j = i + 1
        else:
            out.append(f"={total + current:.10g}")
        i = j
    return out
