from enum import StrEnum


class SlotOutcome(StrEnum):
    BUFFERED = "buffered"
    FIRED = "fired"
    MISSED = "missed"
    SKIPPED = "skipped"

    def __str__(self) -> str:
        return str(self.value)
