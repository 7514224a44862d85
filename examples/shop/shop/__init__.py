"""A tiny shop used to demonstrate repomem."""

from .catalog import Catalog, Product
from .cart import Cart

__all__ = ["Catalog", "Product", "Cart"]
