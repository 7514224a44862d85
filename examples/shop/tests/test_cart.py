from shop.cart import Cart
from shop.catalog import load_default_catalog
from shop.checkout import checkout
from shop.payments import FakeCardProvider


def test_total_includes_tax():
    cart = Cart(load_default_catalog())
    cart.add_item("A-100", 2)
    assert cart.total_cents() == 3000


def test_checkout_charges_the_card():
    cart = Cart(load_default_catalog(), discount_percent=10)
    cart.add_item("B-300")
    provider = FakeCardProvider(balance_cents=10_000)
    order = checkout(cart, provider)
    assert provider.charges == [order.total_cents]
