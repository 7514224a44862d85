"""Payment providers. Nothing here talks to a real bank."""


class PaymentError(Exception):
    pass


class FakeCardProvider:
    def __init__(self, balance_cents: int):
        self.balance_cents = balance_cents
        self.charges: list[int] = []

    def charge(self, amount_cents: int) -> str:
        if amount_cents > self.balance_cents:
            raise PaymentError("insufficient funds")
        self.balance_cents -= amount_cents
        self.charges.append(amount_cents)
        return f"charge-{len(self.charges)}"

    def refund(self, receipt: str) -> None:
        index = int(receipt.split("-")[1]) - 1
        self.balance_cents += self.charges[index]
