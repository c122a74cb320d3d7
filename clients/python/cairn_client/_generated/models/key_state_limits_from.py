from enum import StrEnum


class KeyStateLimitsFrom(StrEnum):
    CONFIG = "config"
    CREW = "crew"
    OPERATOR = "operator"

    def __str__(self) -> str:
        return str(self.value)
