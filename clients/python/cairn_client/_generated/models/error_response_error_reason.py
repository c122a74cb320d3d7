from enum import StrEnum


class ErrorResponseErrorReason(StrEnum):
    NO_ANSWER = "no_answer"
    READ_ONLY = "read_only"

    def __str__(self) -> str:
        return str(self.value)
