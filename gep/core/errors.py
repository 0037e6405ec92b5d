"""Errors a user can act on. The CLI prints their message as one line and exits non-zero."""


class GepError(Exception):
    """Base: the message is a complete one-line explanation for the user."""

    exit_code = 2


class WorkspaceError(GepError):
    """The workspace is missing, not a git repo, dirty, locked or otherwise unusable."""


class StoreError(GepError):
    """The store cannot be opened, read or migrated."""


class AssetError(GepError):
    """A gene, capsule or event file is malformed (the message names the file and the field)."""


class ConfigError(GepError):
    """gep.toml or an environment variable holds a bad value."""


class PendingCycleError(GepError):
    """A cycle is still awaiting changes on this workspace."""
