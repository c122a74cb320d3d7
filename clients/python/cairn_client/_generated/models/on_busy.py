from enum import StrEnum


class OnBusy(StrEnum):
    INTERRUPT = "interrupt"
    QUEUE = "queue"
    REJECT = "reject"

    def __str__(self) -> str:
        return str(self.value)
