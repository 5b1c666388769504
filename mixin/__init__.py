"""What the dashboards and the alert rules are generated from: the mixin config, and the
generators' shared command line (docs_gen's generators use it too)."""
