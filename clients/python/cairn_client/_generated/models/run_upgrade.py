from enum import StrEnum


class RunUpgrade(StrEnum):
    COMPATIBLE = "compatible"
    MANUAL = "manual"
    PINNED = "pinned"

    def __str__(self) -> str:
        return str(self.value)
