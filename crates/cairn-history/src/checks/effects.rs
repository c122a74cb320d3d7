//! Effects per attempt: a step program's outside effect may repeat only
//! when a fault hit the process holding the attempt (at most one more than
//! those faults), and never for a tool that is not idempotent.

use std::collections::BTreeMap;

use crate::report::{Violation, ViolationKind};
use crate::state::{Effect, FinalState};

/// The effects rule over the effects log and attempts of `state`.
pub fn effects_per_attempt(state: &FinalState) -> Vec<Violation> {
    let mut by_attempt: BTreeMap<(&str, u32, u32), Vec<&Effect>> = BTreeMap::new();
    for effect in &state.effects {
        let at = (effect.run.as_str(), effect.step, effect.attempt);
        by_attempt.entry(at).or_default().push(effect);
    }
    let mut out = vec![];
    for ((run, step, attempt), effects) in by_attempt {
        let known = state
            .attempts
            .iter()
            .find(|a| a.run == run && a.step == step && a.attempt == attempt);
        let (faults, idempotent) = known.map_or((0, false), |a| (a.faults, a.idempotent));
        let allowed = if idempotent {
            faults.saturating_add(1)
        } else {
            1
        };
        let n = effects.len();
        if n > allowed as usize {
            let holders: Vec<String> = effects
                .iter()
                .map(|e| format!("epoch {} on {}", e.epoch, e.owner))
                .collect();
            let tool = if idempotent {
                "idempotent"
            } else {
                "non-idempotent"
            };
            let message = format!(
                "run {run} step {step} attempt {attempt}: {n} effects, at most {allowed} \
                 allowed ({faults} fault(s), {tool} tool): {holders:?}"
            );
            out.push(Violation::new(
                ViolationKind::TooManyEffects,
                message,
                vec![],
            ));
        }
    }
    out
}
