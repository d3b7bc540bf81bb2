"""The floor view: every table on a broker from its retained topics (``baccarat-edge fleet``),
as a terminal table, JSON, or Prometheus metrics. See daemon/fleet/README.md."""
