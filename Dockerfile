# The service image. Uses an external PostgreSQL with pgvector given by DATABASE_URL
# (see docker-compose.yml); the embedded server is for single-machine use.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HF_HUB_OFFLINE=1 \
    SUPPORTRAG_HOST=0.0.0.0 \
    PORT=5000 \
    SUPPORTRAG_MODEL_DIR=/opt/supportrag/models

WORKDIR /app
# Install dependencies first so code changes don't reinstall torch.
# PIP_EXTRA_INDEX_URL may point at a CPU-only torch index to keep the image small.
ARG PIP_EXTRA_INDEX_URL=""
COPY pyproject.toml README.md ./
COPY service/__init__.py service/__init__.py
RUN pip install --no-cache-dir -e . && rm -rf /root/.cache
COPY . .
# The ONNX graph, exported once into the image (files readable by the service user): no container start, and no
# worker, exports it again.
RUN supportrag model export

RUN useradd --create-home --uid 10001 supportrag
USER supportrag
EXPOSE 5000
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=5 \
    CMD python -c "import urllib.request,sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:5000/healthz').status != 200)"
CMD ["supportrag", "serve", "--workers", "2"]
