"""Checkout: turn a cart into a paid order."""

from dataclasses import dataclass

from .cart import Cart
from .payments import FakeCardProvider, PaymentError


@dataclass(frozen=True)
class Order:
    receipt: str
    total_cents: int
    lines: tuple[str, ...]


def checkout(cart: Cart, provider: FakeCardProvider) -> Order:
    total = cart.total_cents()
    if total == 0:
        raise ValueError("the cart is empty")
    try:
        receipt = provider.charge(total)
    except PaymentError as error:
        raise RuntimeError(f"payment failed: {error}") from error
    lines = tuple(cart.summary().splitlines())
    cart.quantities.clear()
    return Order(receipt, total, lines)


def cancel(order: Order, provider: FakeCardProvider) -> None:
    provider.refund(order.receipt)
