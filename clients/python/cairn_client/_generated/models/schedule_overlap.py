from enum import StrEnum


class ScheduleOverlap(StrEnum):
    ALLOW = "allow"
    BUFFER = "buffer"
    CANCEL = "cancel"
    SKIP = "skip"

    def __str__(self) -> str:
        return str(self.value)
