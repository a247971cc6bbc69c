"""Prices: the table of what each model's tokens cost (`table.py`), and what a call
costs at those prices (`cost.py`)."""
