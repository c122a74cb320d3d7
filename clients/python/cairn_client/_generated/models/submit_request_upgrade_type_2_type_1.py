from enum import StrEnum


class SubmitRequestUpgradeType2Type1(StrEnum):
    COMPATIBLE = "compatible"
    MANUAL = "manual"
    PINNED = "pinned"

    def __str__(self) -> str:
        return str(self.value)
