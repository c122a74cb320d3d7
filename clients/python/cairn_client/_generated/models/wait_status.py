from enum import StrEnum


class WaitStatus(StrEnum):
    ANSWERED = "answered"
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    OPEN = "open"

    def __str__(self) -> str:
        return str(self.value)
