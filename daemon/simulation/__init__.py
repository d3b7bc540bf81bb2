"""The simulated dealer (a shoe dealt by the rules, with faults), the fixture library and the
event streams fixtures must produce (a fixture replayed through its real driver into a fresh engine)."""
