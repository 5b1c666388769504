"""The Alertmanager example: loopwatch's alerts, by their own label, routed by severity."""

from __future__ import annotations

from typing import Any

from mixin import config as c


def alertmanager_config() -> dict[str, Any]:
    key, value = c.ROUTE_LABEL
    mine = f'{key}="{value}"'
    return {
        "global": {"resolve_timeout": "5m"},
        "route": {
            "receiver": "default",
            "group_by": ["alertname", "job"],
            "routes": [
                {
                    "receiver": "tickets",
                    "matchers": [mine],
                    "group_by": ["alertname", "service", "job"],
                    "group_wait": "30s",
                    "group_interval": "5m",
                    "repeat_interval": "4h",
                    "routes": [
                        {
                            "receiver": "pager",
                            "matchers": ['severity="critical"'],
                            "group_wait": "10s",
                            "repeat_interval": "1h",
                        },
                        {"receiver": "tickets", "matchers": ['severity="warning"']},
                        {"receiver": "blackhole", "matchers": ['severity="info"']},
                    ],
                }
            ],
        },
        "inhibit_rules": [
            {
                "source_matchers": [mine, 'alertname="LoopwatchDown"'],
                "target_matchers": [mine, 'severity=~"warning|info"'],
                "equal": ["job", "instance"],
            }
        ],
        "receivers": [
            {"name": "default"},
            {
                "name": "pager",
                "webhook_configs": [{"url": "http://webhook:8080/critical", "send_resolved": True}],
            },
            {
                "name": "tickets",
                "webhook_configs": [{"url": "http://webhook:8080/warning", "send_resolved": True}],
            },
            {"name": "blackhole"},
        ],
    }
