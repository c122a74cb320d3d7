from enum import StrEnum


class JournalEntryKind(StrEnum):
    ASSISTANT_TEXT = "assistant_text"
    HUMAN_ANSWER = "human_answer"
    REPAIR = "repair"
    TOOL_CALL = "tool_call"
    TOOL_CALL_STARTED = "tool_call_started"
    TOOL_RESULT = "tool_result"
    TURN_END = "turn_end"

    def __str__(self) -> str:
        return str(self.value)
