"""The daemon as a service: configuration, logging, systemd notification and the runner.

``config`` composes every component's settings into one validated YAML file;
``runner`` wires drivers, engine, journal and publisher around one input queue;
``sdnotify`` talks to systemd; ``demo_broker`` is the embedded broker of the demo.
"""
