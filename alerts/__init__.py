"""Alert rules and Alertmanager routing, generated from the mixin config (mixin/config.py)."""
