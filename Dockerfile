# loopwatch: the OTLP service (`loopwatch serve`) and the demo agent (`loopwatch demo`), in the
# compiled build (mypyc: LOOPWATCH_COMPILE=1). LOOPWATCH_PURE_PYTHON=1 in a container's
# environment runs the same image's pure Python instead; `loopwatch --version` says which runs.

# The wheel is compiled in a stage of its own, so the image carries no C compiler.
FROM python:3.11.11-slim AS compile
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY build_backend ./build_backend
COPY src ./src
RUN LOOPWATCH_COMPILE=1 pip wheel --no-deps --wheel-dir /wheels .

FROM python:3.11.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

COPY --from=compile /wheels /wheels
RUN pip install "$(ls /wheels/loopwatch-*.whl)[serve]" && rm -rf /wheels \
    && useradd --system --no-create-home loopwatch

USER loopwatch
WORKDIR /home
# OTLP gRPC, OTLP HTTP, /metrics + /healthz + /readyz
EXPOSE 4317 4318 9464
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9464/readyz', timeout=2)"]
CMD ["loopwatch", "serve", "--grpc-address", "0.0.0.0:4317", "--http-address", "0.0.0.0:4318", "--metrics-address", "0.0.0.0:9464"]
