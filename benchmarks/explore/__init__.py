"""One-off exploration prototypes (README.md); nothing in the product imports them."""
