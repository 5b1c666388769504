# loopwatch: the OTLP service (`loopwatch serve`) and the demo agent (`loopwatch demo`).
FROM python:3.11.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY pyproject.toml README.md ./
COPY processor ./processor
RUN pip install ".[serve]" && useradd --system --no-create-home loopwatch

USER loopwatch
WORKDIR /home
# OTLP gRPC, OTLP HTTP, /metrics + /healthz + /readyz
EXPOSE 4317 4318 9464
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9464/readyz', timeout=2)"]
CMD ["loopwatch", "serve", "--grpc-address", "0.0.0.0:4317", "--http-address", "0.0.0.0:4318", "--metrics-address", "0.0.0.0:9464"]
