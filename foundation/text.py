"""Text a database can keep as it is. JSON (and so a request, a socket message or a
worker's reply) can carry a NUL character, which PostgreSQL stores in no text or JSON
column, and an unpaired surrogate (a lone \\ud800 escape), which no UTF-8 database
stores: a write of either fails, and where it fails decides what is lost (a batch's every
later line, a conversation's message, or a 500). Checked where text enters, made
storable where it must be kept anyway."""

import re
from typing import Any

# After json.loads a surrogate pair is one character: any surrogate left pairs with nothing.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable_text(text: str) -> bool:
    """Whether a database keeps the string as it is (see the module docstring)."""
    if "\x00" in text:
        return False
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def storable(value: Any) -> Any:
    """`value` (decoded JSON) with every string a database cannot keep made keepable: NUL
    and unpaired surrogates become U+FFFD."""
    if isinstance(value, str):
        if storable_text(value):
            return value
        return _UNSTORABLE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {storable(k): storable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [storable(item) for item in value]
    return value
