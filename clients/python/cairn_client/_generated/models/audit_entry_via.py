from enum import StrEnum


class AuditEntryVia(StrEnum):
    API = "api"
    CLI = "cli"
    CONSOLE = "console"
    HOOK = "hook"
    LINK = "link"
    LOCAL = "local"

    def __str__(self) -> str:
        return str(self.value)
