"""Agent-side client of the Reliability Governor: a typed HTTP client, the `governor-agent` CLI,
an MCP server and coding-agent hooks. Depends on httpx and mcp only."""

from governor_client.client import GovernorClient
from governor_client.config import Config
from governor_client.errors import (
    ConfigurationError,
    GovernorError,
    GovernorUnreachable,
    ReviewPending,
)
from governor_client.session import AgentSession
from governor_client.workspace import Workspace

__all__ = ["AgentSession", "Config", "ConfigurationError", "GovernorClient", "GovernorError",
           "GovernorUnreachable", "ReviewPending", "Workspace"]
