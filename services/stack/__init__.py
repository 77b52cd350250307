"""The composition root: which services exist and how they are put together.

``agent_core`` is the library and knows no service (a lint rule holds it to that). What composes
the services lives here: the registry of service builders (:mod:`services.stack.registry`), the
stack supervisor behind ``soong-agent up`` (:mod:`services.stack.up`), the deployment checks
(:mod:`services.stack.deploy`) and the command-line commands that need the services
(:mod:`services.stack.commands`), which the CLI finds through the ``soong_agent.commands`` entry
points declared in ``pyproject.toml``.
"""
