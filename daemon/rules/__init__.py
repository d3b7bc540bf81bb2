"""Pure baccarat rules: the third-card tableau, round outcomes, bets and exact odds.

Nothing in this package does I/O or keeps state; every function is a plain
mapping from cards (and a variant) to a result, so it can be checked by exact
enumeration of the whole shoe.
"""
