"""The one helper that builds every service: context, health, logging, start-up and shutdown."""

from agent_core.service.context import BackgroundTask, ServiceContext, ServiceParts
from agent_core.service.health import health_consumer, ping_service, ping_services
from agent_core.service.logs import setup_logging
from agent_core.service.runner import (
    EXIT_BUS_UNREACHABLE,
    EXIT_CONFIG,
    EXIT_SUBSCRIBER_DIED,
    ServiceFactory,
    run_service,
)

__all__ = [
    "EXIT_BUS_UNREACHABLE",
    "EXIT_CONFIG",
    "EXIT_SUBSCRIBER_DIED",
    "BackgroundTask",
    "ServiceContext",
    "ServiceFactory",
    "ServiceParts",
    "health_consumer",
    "ping_service",
    "ping_services",
    "run_service",
    "setup_logging",
]
