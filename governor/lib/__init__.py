"""Plumbing: transports, waits, process machinery and the errors every layer raises. Nothing
here writes the product's records or reads across a permission line."""
