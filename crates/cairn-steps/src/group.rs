//! A step program's process group as recorded when it starts (the
//! `program_started` event), and how a takeover ends one that a dead engine
//! left behind. A SIGKILLed engine takes its program with it (the
//! parent-death signal), but not what the program forked: those keep the
//! program's process group and run on, beside the step's re-run. The
//! process that takes the run over ends that group ([`reap`]) when it can
//! prove three things: the group was started on this machine, in this boot
//! and pid namespace; the process that started it is gone; and the group is
//! still the run's, not another's that reuses its number.

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

use cairn_core::event::payload::ProgramStarted;
use cairn_core::{Attempt, EventData, EventKind, EventRecord, NewEvent, RunId, StepIdx};

use crate::procfs::{self, Machine, Stat};

/// The variable naming the run in every step program's environment, which
/// the processes it forks inherit.
pub const RUN_ID_VAR: &str = "CAIRN_RUN_ID";

/// A program's process group, as its `program_started` event records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramGroup {
    /// The group's id: the program's pid.
    pub pgid: i32,
    /// The program's start time (clock ticks since boot): with its pid,
    /// which process it was.
    pub start: u64,
    #[serde(flatten)]
    pub machine: Machine,
    /// The process that started it (the engine), and when that started.
    pub engine_pid: u32,
    pub engine_start: u64,
}

impl From<ProgramStarted> for ProgramGroup {
    fn from(p: ProgramStarted) -> ProgramGroup {
        ProgramGroup {
            pgid: p.pgid,
            start: p.start,
            machine: Machine {
                host: p.host,
                boot: p.boot,
                pidns: p.pidns,
            },
            engine_pid: p.engine_pid,
            engine_start: p.engine_start,
        }
    }
}

impl ProgramGroup {
    /// The group of the program this process just started as `pid`, read
    /// before anything can reap it. `None` without `/proc`.
    pub fn of_spawned(pid: u32) -> Option<ProgramGroup> {
        static ENGINE_START: OnceLock<Option<u64>> = OnceLock::new();
        let engine_start =
            (*ENGINE_START.get_or_init(|| Stat::of(std::process::id()).map(|s| s.start)))?;
        Some(ProgramGroup {
            pgid: i32::try_from(pid).ok()?,
            start: Stat::of(pid)?.start,
            machine: Machine::here()?.clone(),
            engine_pid: std::process::id(),
            engine_start,
        })
    }

    /// Its `program_started` event, for attempt `attempt` of step `idx`.
    pub fn event(&self, idx: StepIdx, attempt: Attempt) -> NewEvent {
        NewEvent::typed(EventData::ProgramStarted(ProgramStarted {
            idx,
            attempt,
            pgid: self.pgid,
            start: self.start,
            host: self.machine.host.clone(),
            boot: self.machine.boot.clone(),
            pidns: self.machine.pidns.clone(),
            engine_pid: self.engine_pid,
            engine_start: self.engine_start,
        }))
    }

    /// The process that started it no longer exists: no process has its
    /// pid, a zombie does, or one started at another time.
    fn engine_is_gone(&self) -> bool {
        match Stat::of(self.engine_pid) {
            None => true,
            Some(stat) => stat.zombie || stat.start != self.engine_start,
        }
    }

    /// Whether a process is in the group (a signal 0 to it reaches one).
    /// A number no program's group can have (0 would be this process's own
    /// group, 1 init's) has none.
    fn has_processes(&self) -> bool {
        self.pgid > 1 && killpg(Pid::from_raw(self.pgid), None).is_ok()
    }

    /// A process whose pid is the group's number, if one exists: the
    /// program itself (its start time), or proof that the number was
    /// reused after the group ended.
    fn leader(&self) -> Option<Stat> {
        u32::try_from(self.pgid).ok().and_then(Stat::of)
    }
}

/// Ends (SIGKILL to the group) each process group that a run's `events`
/// record as started by a process of this machine that no longer exists,
/// if the group still has processes and is still the run's: its program is
/// alive with its recorded start time or, with the program gone, one of its
/// processes carries the run's id in its environment (no other group
/// could). Called by the process that took the run over, before the step
/// runs again. Returns the groups it ended.
pub fn reap(run: RunId, events: &[EventRecord]) -> Vec<i32> {
    let Some(here) = Machine::here() else {
        return vec![];
    };
    let mut left: Vec<ProgramGroup> = events
        .iter()
        .filter(|e| e.kind == EventKind::ProgramStarted)
        .filter_map(|e| match e.payload() {
            Ok(EventData::ProgramStarted(p)) => Some(ProgramGroup::from(p)),
            _ => None,
        })
        .filter(|g| g.machine == *here && g.engine_is_gone() && g.has_processes())
        .collect();
    left.dedup();
    // Without its program, a group is known by its processes: one pass
    // over `/proc` for all of them (none in the usual case).
    let orphans: HashSet<i32> = left
        .iter()
        .filter(|g| g.leader().is_none())
        .map(|g| g.pgid)
        .collect();
    // No `/proc` pass at all when every group still has its program.
    let members = match orphans.is_empty() {
        true => HashMap::new(),
        false => procfs::members(&orphans),
    };
    let entry = format!("{RUN_ID_VAR}={run}");
    let runs = |g: &ProgramGroup| match g.leader() {
        Some(leader) => leader.start == g.start,
        None => members
            .get(&g.pgid)
            .is_some_and(|m| m.iter().any(|&pid| procfs::environ_has(pid, &entry))),
    };
    let mut ended = vec![];
    for group in left.into_iter().filter(runs) {
        if ended.contains(&group.pgid) {
            continue;
        }
        match killpg(Pid::from_raw(group.pgid), Signal::SIGKILL) {
            Ok(()) => {
                tracing::info!(run = %run, pgid = group.pgid,
                    "ended a step program's process group left by a dead engine");
                ended.push(group.pgid);
            }
            Err(e) => tracing::warn!(run = %run, pgid = group.pgid, error = %e,
                "could not end a step program's process group left by a dead engine"),
        }
    }
    ended
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};
    use std::os::unix::process::CommandExt;
    use std::process::{Child, Command, Stdio};
    use std::time::Duration;

    /// A program in a group of its own, as a step runs it, with a `sleep`
    /// it forked: killed (the group) and waited for when dropped.
    struct Started {
        program: Child,
        forked: u32,
        run: RunId,
    }

    impl Started {
        fn new() -> Started {
            let run = RunId::new();
            let mut program = Command::new("sh")
                .args(["-c", "sleep 30 & echo $!; wait"])
                .env(RUN_ID_VAR, run.to_string())
                .stdout(Stdio::piped())
                .process_group(0)
                .spawn()
                .unwrap_or_else(|e| panic!("sh: {e}"));
            let mut line = String::new();
            if let Some(out) = program.stdout.take() {
                let _ = BufReader::new(out).read_line(&mut line);
            }
            let forked = line
                .trim()
                .parse()
                .unwrap_or_else(|e| panic!("{line}: {e}"));
            Started {
                program,
                forked,
                run,
            }
        }

        fn pgid(&self) -> i32 {
            self.program.id() as i32
        }

        /// Its record, as if the process that started it were gone (its
        /// pid now names a process started at another time).
        fn orphaned(&self) -> ProgramGroup {
            let mut group =
                ProgramGroup::of_spawned(self.program.id()).unwrap_or_else(|| panic!("no /proc"));
            group.engine_start += 1;
            group
        }

        /// Kills the program alone (as its parent-death signal does).
        fn kill_program(&mut self) {
            let _ = self.program.kill();
            let _ = self.program.wait();
        }
    }

    impl Drop for Started {
        fn drop(&mut self) {
            let _ = killpg(Pid::from_raw(self.pgid()), Signal::SIGKILL);
            let _ = self.program.wait();
        }
    }

    fn events(run: RunId, groups: &[&ProgramGroup]) -> Vec<EventRecord> {
        let at = "2024-01-01T00:00:00Z";
        (1..)
            .zip(groups)
            .map(|(seq, g)| {
                let data = g.event(StepIdx(0), Attempt(1)).data;
                let e = serde_json::json!({"run_id": run, "seq": seq, "at": at,
                               "kind": "program_started", "data": data});
                serde_json::from_value(e).unwrap_or_else(|e| panic!("{e}"))
            })
            .collect()
    }

    fn is_gone(pid: u32) -> bool {
        (0..250).any(|_| {
            let gone = Stat::of(pid).is_none_or(|s| s.zombie);
            if !gone {
                std::thread::sleep(Duration::from_millis(20));
            }
            gone
        })
    }

    #[test]
    fn a_group_whose_engine_is_gone_is_ended_with_what_it_forked() {
        if Machine::here().is_none() {
            return; // no /proc: nothing is recorded, nothing reaped
        }
        let started = Started::new();
        let live = ProgramGroup::of_spawned(started.program.id());
        let live = live.unwrap_or_else(|| panic!("no record"));
        assert_eq!(live.engine_pid, std::process::id());
        // Its engine (this process) lives: the group is its business.
        assert_eq!(
            reap(started.run, &events(started.run, &[&live])),
            Vec::<i32>::new()
        );
        assert!(Stat::of(started.forked).is_some_and(|s| !s.zombie));

        let orphaned = started.orphaned();
        let ended = reap(started.run, &events(started.run, &[&orphaned]));
        assert_eq!(ended, vec![started.pgid()]);
        assert!(is_gone(started.forked), "the forked sleep survived");
    }

    #[test]
    fn without_its_program_a_group_is_ended_only_if_it_carries_the_run() {
        if Machine::here().is_none() {
            return;
        }
        let mut started = Started::new();
        let orphaned = started.orphaned();
        started.kill_program();
        // Another run's record naming this group's number: not its group.
        let other = RunId::new();
        assert_eq!(reap(other, &events(other, &[&orphaned])), Vec::<i32>::new());
        assert!(Stat::of(started.forked).is_some_and(|s| !s.zombie));
        // A record from another machine proves nothing here.
        let mut elsewhere = orphaned.clone();
        elsewhere.machine.host.push_str("-elsewhere");
        let run = started.run;
        assert_eq!(reap(run, &events(run, &[&elsewhere])), Vec::<i32>::new());

        assert_eq!(reap(run, &events(run, &[&orphaned])), vec![started.pgid()]);
        assert!(is_gone(started.forked), "the forked sleep survived");
    }

    #[test]
    fn a_reused_number_is_not_the_group() {
        if Machine::here().is_none() {
            return;
        }
        let started = Started::new();
        let mut reused = started.orphaned();
        // The program recorded started at another time than the process
        // that has its pid now.
        reused.start += 1;
        let run = started.run;
        assert_eq!(reap(run, &events(run, &[&reused])), Vec::<i32>::new());
        assert!(Stat::of(started.forked).is_some_and(|s| !s.zombie));
        // Numbers no program's group has: 0 would be this process's own
        // group (SIGKILL to it would end this test), 1 init's.
        for pgid in [0, 1] {
            let bogus = ProgramGroup {
                pgid,
                ..reused.clone()
            };
            assert_eq!(reap(run, &events(run, &[&bogus])), Vec::<i32>::new());
        }
    }
}
