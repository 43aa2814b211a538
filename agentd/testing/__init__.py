"""Test doubles shipped with agentd (emulators). Imports no other agentd module."""
