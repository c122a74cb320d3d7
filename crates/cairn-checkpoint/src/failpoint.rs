//! Test-only crash points at every write boundary. With the `failpoints`
//! feature, `CAIRN_FAILPOINTS` (a comma-separated list) makes the process
//! SIGKILL itself when it reaches a listed point:
//!
//! - the executor's points, by step index: `before_commit:18`,
//!   `after_commit:3`, `before_claim:0` / `after_claim:0` (the cursor a
//!   claim is for), `before_journal:1` / `after_journal:1` (a step's first
//!   journal item), `during_backoff:2`;
//! - the store's points, one before and one after every write operation:
//!   `before:OP` or `after:OP`, optionally `#N` for the Nth time in this
//!   process (the first by default). `OP` is the `Store` method (`submit`,
//!   `claim`, `claim_next`, `heartbeat`, `set_aside`, `commit_step`, `act`,
//!   `fork`, `answer_wait`, `expire_wait`, `append_journal`,
//!   `record_events`, `compact`, `claim_task`), or `open_wait` for a step
//!   commit that opens a wait, `listen` for one that waits for a signal. "before" is before its transaction begins,
//!   "after" once it returned without error (`claim_next`: only when it
//!   took a run). A retried write passes its points on every try.
//!
//! `pause_after:OP:MS` holds the process MS milliseconds once `OP`
//! returned (every hit), so a test can let another process act in between
//! (a worker claiming a run an `--enqueue` answer just queued);
//! `pause_before:OP:MS` before it begins (a cancel landing while a spawn is
//! about to commit). And
//! `pause_before_pdeathsig:MS` holds a forked step program before it asks
//! for its parent-death signal (`cairn-steps`' program.rs).
//!
//! `lose_ack:OP[#N]` makes that operation report a connection error after
//! its commit landed: an acknowledgement lost on the way back, for the
//! retry that must recognise its own success (SQLite has no connection to
//! cut; PostgreSQL's tests also cut a real one).
//!
//! Without the feature every function here is an empty inline function:
//! release builds carry none of this.

/// An executor point for step `idx`: kills the process if listed.
#[inline(always)]
pub fn step(point: &str, idx: cairn_core::StepIdx) {
    #[cfg(feature = "failpoints")]
    if listed(&format!("{point}:{idx}")) {
        die(&format!("{point}:{idx}"));
    }
    #[cfg(not(feature = "failpoints"))]
    let _ = (point, idx);
}

/// The store's point `before:OP` / `after:OP`: kills the process if listed
/// for this hit.
#[inline(always)]
pub fn store(phase: &str, op: &str) {
    #[cfg(feature = "failpoints")]
    if let Some(me) = counted(phase, op) {
        die(&me);
    }
    #[cfg(feature = "failpoints")]
    pause(phase, op);
    #[cfg(not(feature = "failpoints"))]
    let _ = (phase, op);
}

/// Whether `lose_ack:OP` is listed for this hit: the caller then reports
/// a lost connection although its commit landed.
#[inline(always)]
pub fn lose_ack(op: &str) -> bool {
    #[cfg(feature = "failpoints")]
    return counted("lose_ack", op).is_some();
    #[cfg(not(feature = "failpoints"))]
    {
        let _ = op;
        false
    }
}

#[cfg(feature = "failpoints")]
fn listed(me: &str) -> bool {
    std::env::var("CAIRN_FAILPOINTS")
        .map(|spec| spec.split(',').any(|p| p.trim() == me))
        .unwrap_or(false)
}

/// Counts this hit of `PHASE:OP` and answers the listed spelling it
/// matches (`PHASE:OP` on the first hit, `PHASE:OP#N` on the Nth).
#[cfg(feature = "failpoints")]
fn counted(phase: &str, op: &str) -> Option<String> {
    use std::collections::HashMap;
    use std::sync::Mutex;
    static HITS: Mutex<Option<HashMap<String, u32>>> = Mutex::new(None);

    std::env::var_os("CAIRN_FAILPOINTS")?;
    let base = format!("{phase}:{op}");
    let n = {
        let mut hits = HITS.lock().unwrap_or_else(|p| p.into_inner());
        let n = hits
            .get_or_insert_with(HashMap::new)
            .entry(base.clone())
            .or_insert(0);
        *n += 1;
        *n
    };
    let nth = format!("{base}#{n}");
    if listed(&nth) {
        return Some(nth);
    }
    (n == 1 && listed(&base)).then_some(base)
}

/// `pause_PHASE:OP:MS`: blocks this thread MS milliseconds (test-only; a
/// blocking sleep is what holds the whole process still).
#[cfg(feature = "failpoints")]
fn pause(phase: &str, op: &str) {
    let Ok(spec) = std::env::var("CAIRN_FAILPOINTS") else {
        return;
    };
    let me = format!("pause_{phase}:{op}:");
    let ms = spec
        .split(',')
        .find_map(|p| p.trim().strip_prefix(me.as_str())?.parse::<u64>().ok());
    if let Some(ms) = ms {
        eprintln!("cairn: failpoint pause_{phase}:{op} hit, pausing {ms} ms");
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
}

#[cfg(feature = "failpoints")]
fn die(me: &str) {
    eprintln!("cairn: failpoint {me} hit, killing this process");
    let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
}
