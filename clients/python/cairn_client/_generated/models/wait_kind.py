from enum import StrEnum


class WaitKind(StrEnum):
    APPROVAL = "approval"
    QUESTION = "question"
    REVIEW = "review"

    def __str__(self) -> str:
        return str(self.value)
