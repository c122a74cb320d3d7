//! Test-only crash points. With the `failpoints` feature, the environment
//! variable `CAIRN_FAILPOINTS=before_commit:18,after_commit:3` makes the
//! process SIGKILL itself at that point of that step. The points, each a
//! write boundary of the executor: `before_claim`/`after_claim` (the cursor
//! a claim is for), `before_journal`/`after_journal` (a step's first
//! journal item), `before_commit`/`after_commit`, `during_backoff`. Without the feature
//! `hit` is an empty inline function: release builds carry none of this.

#[cfg(feature = "failpoints")]
pub(crate) fn hit(point: &str, idx: cairn_core::StepIdx) {
    let Ok(spec) = std::env::var("CAIRN_FAILPOINTS") else {
        return;
    };
    let me = format!("{point}:{idx}");
    if spec.split(',').any(|p| p.trim() == me) {
        eprintln!("cairn: failpoint {me} hit, killing this process");
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
    }
}

#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub(crate) fn hit(_point: &str, _idx: cairn_core::StepIdx) {}
