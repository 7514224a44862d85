"""Model backends: one interface, one module per third-party runtime."""
