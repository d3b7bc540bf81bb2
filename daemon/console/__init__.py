"""The pit console: a web application for supervisors and a dealer display.

It reads the tables' MQTT topics only (the contract in ``daemon/mqtt/contract/``) and
sends signed commands on ``baccarat/v1/{table}/cmd`` with the logged-in person's own key;
see ``daemon/console/README.md``.
"""
