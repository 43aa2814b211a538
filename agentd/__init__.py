"""agentd: an editor-integrated coding-agent daemon."""

__version__ = "0.1.0"
