"""What the dashboards, the alert rules and the README's metrics tables are generated from: the
mixin config, and the generators' shared command line."""
