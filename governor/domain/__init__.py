"""The product's rules as plain functions over plain data. Nothing here imports Django."""
