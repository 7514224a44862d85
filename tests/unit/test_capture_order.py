"""tree-sitter's query captures come in match order, which changed between parses of one file;
the call sites saved in the index are read from them, so they are put in document order."""

from __future__ import annotations

from repomem.languages.python.syntax import CALL_QUERY, LANGUAGE_NAME
from repomem.languages.treesitter import capture_nodes, parse

# Nested and chained calls, calls in arguments, decorators and comprehensions: the shapes whose
# captures tree-sitter returned out of document order.
SOURCE = b'''
@decorate(option(1))
def outer(a):
    return first(second(a), third(fourth(a).fifth()))

class Box(base(1)):
    items = [make(i) for i in range(3)]

    def method(self):
        self.helper(value=compute(self.x)).finish()
        return builder().add(1).add(2).build()
'''


def test_captures_come_in_document_order_and_the_same_at_every_parse():
    orders = set()
    for _ in range(20):
        nodes = capture_nodes(LANGUAGE_NAME, CALL_QUERY, parse(LANGUAGE_NAME, SOURCE).root_node, "callee")
        spans = [(node.start_byte, node.end_byte) for node in nodes]
        assert spans == sorted(spans, key=lambda span: (span[0], -span[1]))
        orders.add(tuple(spans))
    assert len(orders) == 1
    names = [SOURCE[start:end].decode() for start, end in next(iter(orders))]
    assert names[:5] == ["decorate", "option", "first", "second", "third"]
