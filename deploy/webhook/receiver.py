"""A webhook receiver for the demo stack: prints every Alertmanager notification it gets.

Stdlib only (runs in a plain python image). POST /<route> logs one line per alert; GET /healthz
answers 200 for the container health check.
"""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        for alert in body.get("alerts", []):
            labels = alert.get("labels", {})
            summary = alert.get("annotations", {}).get("summary", "")
            print(
                f"{self.path.strip('/') or 'default'} {alert.get('status')} "
                f"{labels.get('alertname')} severity={labels.get('severity')} "
                f"service={labels.get('service', '')} tool={labels.get('tool', '')}: {summary}",
                flush=True,
            )
        self.send_response(200)
        self.end_headers()

    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/healthz" else 404)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        return  # one line per alert is enough


def main() -> None:
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8080
    ThreadingHTTPServer(("0.0.0.0", port), Handler).serve_forever()


if __name__ == "__main__":
    main()
