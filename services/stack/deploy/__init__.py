"""Deployment files checked without Docker: the Dockerfile's image and docker-compose.yml."""

from services.stack.deploy.compose_check import ENV_EXAMPLE, PROVIDER_KEY_VARS, check_compose
from services.stack.deploy.dockerfile import ImageFacts, read_dockerfile

__all__ = ["ENV_EXAMPLE", "PROVIDER_KEY_VARS", "ImageFacts", "check_compose", "read_dockerfile"]
