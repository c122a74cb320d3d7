//! The providers' pairing rules, checked on a neutral transcript before any
//! request is sent: a request that breaks them is a bug in the caller, and
//! an adapter refuses it instead of sending it.
//!
//! Grouping: consecutive `Assistant`/`ToolCall` items are one assistant
//! message; the run of `ToolResult` items after it answers its calls.

use std::collections::HashSet;

use crate::Item;

/// A broken pairing rule: which item, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("item {index}: {reason}")]
pub struct PairingError {
    pub index: usize,
    pub reason: String,
}

fn broken(index: usize, reason: impl Into<String>) -> Result<(), PairingError> {
    Err(PairingError {
        index,
        reason: reason.into(),
    })
}

/// The rules both providers share: every result answers a call of the
/// assistant message right before its run of results, once; every call is
/// answered before the next user or assistant message; no call id twice in
/// one message.
fn check_common(items: &[Item]) -> Result<(), PairingError> {
    // Calls of the latest assistant message not yet answered, and answered.
    let mut open: Vec<String> = Vec::new();
    let mut answered: HashSet<String> = HashSet::new();
    let mut calls_here: HashSet<String> = HashSet::new();
    let mut prev: Option<&Item> = None;
    for (i, item) in items.iter().enumerate() {
        let starts_message = !matches!(
            (prev, item),
            (
                Some(Item::Assistant { .. } | Item::ToolCall { .. }),
                Item::Assistant { .. } | Item::ToolCall { .. }
            ) | (Some(Item::ToolResult { .. }), Item::ToolResult { .. })
        );
        if starts_message && !matches!(item, Item::ToolResult { .. }) {
            if let Some(id) = open.first() {
                return broken(
                    i,
                    format!("tool call `{id}` has no result before this message"),
                );
            }
        }
        match item {
            Item::User { .. } => {}
            Item::Assistant { .. } | Item::ToolCall { .. } => {
                if starts_message {
                    calls_here.clear();
                    answered.clear();
                }
                if let Item::ToolCall { id, .. } = item {
                    if !calls_here.insert(id.clone()) {
                        return broken(
                            i,
                            format!("tool call id `{id}` appears twice in one message"),
                        );
                    }
                    open.push(id.clone());
                }
            }
            Item::ToolResult { call_id, .. } => {
                if !matches!(
                    prev,
                    Some(Item::ToolResult { .. } | Item::Assistant { .. } | Item::ToolCall { .. })
                ) {
                    return broken(
                        i,
                        format!("result for `{call_id}` does not follow an assistant message"),
                    );
                }
                if answered.contains(call_id) {
                    return broken(i, format!("tool call `{call_id}` is answered twice"));
                }
                match open.iter().position(|id| id == call_id) {
                    Some(p) => {
                        open.remove(p);
                        answered.insert(call_id.clone());
                    }
                    None => {
                        return broken(
                            i,
                            format!("result for `{call_id}` answers no call of the preceding assistant message"),
                        )
                    }
                }
            }
        }
        prev = Some(item);
    }
    match open.first() {
        Some(id) => broken(items.len(), format!("tool call `{id}` has no result")),
        None => Ok(()),
    }
}

/// OpenAI Chat Completions: each `tool` message answers a `tool_call_id` of
/// the assistant message before it, and every call is answered.
pub fn check_openai(items: &[Item]) -> Result<(), PairingError> {
    check_common(items)
}

/// Anthropic Messages: the first message is the user's; each `tool_result`
/// answers a `tool_use` of the immediately preceding assistant message,
/// results first in their user message; every `tool_use` is answered in the
/// very next message.
pub fn check_anthropic(items: &[Item]) -> Result<(), PairingError> {
    match items.first() {
        Some(Item::User { .. }) | None => {}
        Some(_) => return broken(0, "the first message must be the user's"),
    }
    check_common(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u() -> Item {
        Item::User { text: "u".into() }
    }
    fn a() -> Item {
        Item::Assistant { text: "a".into() }
    }
    fn c(id: &str) -> Item {
        Item::ToolCall {
            id: id.into(),
            name: "t".into(),
            arguments: "{}".into(),
        }
    }
    fn r(id: &str) -> Item {
        Item::ToolResult {
            call_id: id.into(),
            content: "ok".into(),
            is_error: false,
        }
    }

    /// `expected`: `None` if valid for both; else the failing index and a
    /// word of the reason (for OpenAI and Anthropic alike unless noted).
    fn check(items: Vec<Item>, expected: Option<(usize, &str)>) {
        for (name, got) in [
            ("openai", check_openai(&items)),
            ("anthropic", check_anthropic(&items)),
        ] {
            match (&got, expected) {
                (Ok(()), None) => {}
                (Err(e), Some((index, word))) if e.index == index && e.reason.contains(word) => {}
                _ => panic!("{name} on {items:?}: got {got:?}, expected {expected:?}"),
            }
        }
    }

    #[test]
    fn pairing_cases() {
        check(vec![], None);
        check(vec![u(), a()], None);
        check(vec![u(), a(), c("1"), r("1"), a()], None);
        // Parallel calls answered in any order; text between call and result.
        check(vec![u(), c("1"), a(), c("2"), r("2"), r("1"), a()], None);
        check(vec![u(), c("1"), r("1"), c("2"), r("2"), u()], None);
        // A result whose call was cut off by a window.
        check(vec![u(), r("1"), a()], Some((1, "does not follow")));
        // A call without its result before the next message.
        check(vec![u(), c("1"), u()], Some((2, "`1` has no result")));
        // c2, a, c3 are one assistant message: c2 needs its result too.
        check(
            vec![u(), c("1"), r("1"), c("2"), a(), c("3"), r("3")],
            Some((7, "`2` has no result")),
        );
        check(vec![u(), c("1")], Some((2, "`1` has no result")));
        // Parallel calls with one result missing.
        check(
            vec![u(), c("1"), c("2"), r("1"), a()],
            Some((4, "`2` has no result")),
        );
        // A result for a call of an earlier assistant message.
        check(
            vec![u(), c("1"), r("1"), c("2"), r("1")],
            Some((4, "answers no call")),
        );
        // Duplicates.
        check(
            vec![u(), c("1"), r("1"), r("1")],
            Some((3, "answered twice")),
        );
        check(
            vec![u(), c("1"), c("1"), r("1")],
            Some((2, "appears twice")),
        );
        // A result after user text.
        check(vec![u(), c("1"), u(), r("1")], Some((2, "has no result")));
    }

    #[test]
    fn anthropic_wants_the_user_first() {
        let items = vec![a(), u()];
        assert!(check_openai(&items).is_ok());
        assert_eq!(check_anthropic(&items).map_err(|e| e.index), Err(0));
    }
}
