"""The shoe's audit: irregular-shoe detectors and the shoe certificate (pure, no I/O)."""
