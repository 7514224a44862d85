"""Prices, taxes and discounts, all in integer cents."""

TAX_RATES = {"standard": 0.20, "reduced": 0.055, "zero": 0.0}


def compute_tax(amount_cents: int, tax_class: str) -> int:
    """Tax owed on an amount, rounded half up to the cent."""
    rate = TAX_RATES.get(tax_class)
    if rate is None:
        raise ValueError(f"unknown tax class {tax_class}")
    return int(amount_cents * rate + 0.5)


def apply_discount(amount_cents: int, percent: float) -> int:
    """The amount after a percentage discount, never below zero."""
    if not 0 <= percent <= 100:
        raise ValueError("discount must be between 0 and 100 percent")
    return max(0, int(round(amount_cents * (100 - percent) / 100)))


class PriceCalculator:
    def __init__(self, discount_percent: float = 0.0):
        self.discount_percent = discount_percent

    def line_total(self, unit_price_cents: int, quantity: int, tax_class: str) -> int:
        net = apply_discount(unit_price_cents * quantity, self.discount_percent)
        return net + compute_tax(net, tax_class)

    def format_cents(self, cents: int) -> str:
        return f"{cents // 100}.{cents % 100:02d}"
