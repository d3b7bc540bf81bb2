"""baccarat-edge: the card-scanner edge daemon of one live baccarat table."""

__version__ = "0.1.0"
