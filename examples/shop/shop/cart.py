"""A shopping cart over a catalog."""

from .catalog import Catalog
from .pricing import PriceCalculator


class Cart:
    def __init__(self, catalog: Catalog, discount_percent: float = 0.0):
        self.catalog = catalog
        self.calculator = PriceCalculator(discount_percent)
        self.quantities: dict[str, int] = {}

    def add_item(self, sku: str, quantity: int = 1) -> None:
        if quantity <= 0:
            raise ValueError("quantity must be positive")
        self.catalog.find_product(sku)
        self.quantities[sku] = self.quantities.get(sku, 0) + quantity

    def remove_item(self, sku: str) -> None:
        self.quantities.pop(sku, None)

    def total_cents(self) -> int:
        total = 0
        for sku, quantity in self.quantities.items():
            product = self.catalog.find_product(sku)
            total += self.calculator.line_total(product.unit_price_cents, quantity, product.tax_class)
        return total

    def summary(self) -> str:
        lines = []
        for sku, quantity in sorted(self.quantities.items()):
            product = self.catalog.find_product(sku)
            lines.append(f"{quantity} x {product.display_name()}")
        lines.append(f"total {self.calculator.format_cents(self.total_cents())}")
        return "\n".join(lines)
