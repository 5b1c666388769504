"""Alert rules and Alertmanager routing, generated from the mixin config (dashboards/config.py)."""
