"""docker-compose.yml and the Dockerfile cannot run here (no Docker engine): check their wiring."""

from pathlib import Path

import sqlalchemy as sa
import yaml

ROOT = Path(__file__).resolve().parent.parent


def _compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_compose_runs_pgvector_postgres_and_the_service_built_from_the_dockerfile():
    services = _compose()["services"]
    assert services["db"]["image"].startswith("pgvector/pgvector:")
    assert services["app"]["build"] == "."
    assert (ROOT / "Dockerfile").exists()


def test_compose_database_url_points_at_the_db_service_with_its_credentials():
    services = _compose()["services"]
    db_env = services["db"]["environment"]
    url = sa.make_url(services["app"]["environment"]["DATABASE_URL"])
    assert url.host == "db" and url.port == 5432
    assert (url.username, url.password, url.database) == (
        db_env["POSTGRES_USER"], db_env["POSTGRES_PASSWORD"], db_env["POSTGRES_DB"])


def test_compose_waits_for_a_healthy_database_and_checks_the_service_health():
    services = _compose()["services"]
    assert services["app"]["depends_on"]["db"]["condition"] == "service_healthy"
    assert "pg_isready" in " ".join(services["db"]["healthcheck"]["test"])
    assert "/healthz" in " ".join(services["app"]["healthcheck"]["test"])
    container_port = services["app"]["environment"]["PORT"]
    assert any(mapping.endswith(f":{container_port}") for mapping in services["app"]["ports"])


def test_dockerfile_serves_on_all_interfaces_with_the_console_script():
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "SUPPORTRAG_HOST=0.0.0.0" in dockerfile
    assert 'CMD ["supportrag", "serve"' in dockerfile
    assert "/healthz" in dockerfile


def test_the_image_exports_the_model_once_at_build_time_into_a_fixed_folder():
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "RUN supportrag model export" in dockerfile and "SUPPORTRAG_MODEL_DIR=" in dockerfile
    assert dockerfile.index("RUN supportrag model export") < dockerfile.index("USER supportrag")
