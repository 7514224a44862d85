"""Products and the catalog that holds them."""

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Product:
    sku: str
    name: str
    unit_price_cents: int
    tax_class: str = "standard"

    def display_name(self) -> str:
        return f"{self.name} ({self.sku})"


@dataclass
class Catalog:
    products: dict[str, Product] = field(default_factory=dict)

    def add_product(self, product: Product) -> None:
        if product.sku in self.products:
            raise ValueError(f"duplicate sku {product.sku}")
        self.products[product.sku] = product

    def find_product(self, sku: str) -> Product:
        try:
            return self.products[sku]
        except KeyError:
            raise LookupError(f"unknown sku {sku}") from None

    def search(self, text: str) -> list[Product]:
        needle = text.lower()
        return [p for p in self.products.values() if needle in p.name.lower()]


def load_default_catalog() -> Catalog:
    catalog = Catalog()
    catalog.add_product(Product("A-100", "Espresso beans", 1250))
    catalog.add_product(Product("A-200", "Filter coffee", 990))
    catalog.add_product(Product("B-300", "Ceramic mug", 1500, tax_class="reduced"))
    return catalog
