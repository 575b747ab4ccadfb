"""Query parameters of the staff pages."""

ROW_ID_MAX_DIGITS = 9  # under PostgreSQL's integer range: a larger id is no row, not a 500


def is_row_id(text: str) -> bool:
    """Digits a database id can be: ASCII only ("²".isdigit() is true, and int() refuses
    it), and short enough for an integer column."""
    return text.isascii() and text.isdigit() and len(text) <= ROW_ID_MAX_DIGITS
