"""Order reports. `repomem complete examples/shop/shop/report.py:9` fills in the unfinished line."""

from .cart import Cart
from .pricing import compute_tax


def tax_for_order(amount_cents: int, tax_class: str) -> int:
    """Tax owed on an order total."""
    return 
