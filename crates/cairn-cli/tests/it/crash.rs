//! Crash tests on both backends: a `cairn run` of 30 counting steps is
//! SIGKILLed (externally mid-step, or by a failpoint just before / just after
//! a step's commit) and `cairn resume` finishes it; the steps' own execution
//! log proves no finished step ran twice. Plus the crash-loop cap. Each
//! also with `?durability=process`: a process's death loses nothing there.
//! And what a killed engine's step program forked: ended by the process
//! that takes the run over (a resume, a worker) before the step runs again.

use std::time::Duration;

use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;
use serde_json::Value;

use crate::support::{
    agent_sh, crew_toml, is_dead, read_pid, step, wait_until, Case, Kind, Setup, Spawned,
};

const STEPS: u32 = 30;
const KILL_AT: u32 = 18;

every_setup!(
    external_sigkill_mid_step_reruns_only_that_step,
    failpoint_after_commit_resumes_at_the_next_step,
    failpoint_before_commit_reruns_the_uncommitted_step,
    failpoints_around_the_first_claim_lose_and_repeat_nothing,
    crash_loop_cap_fails_the_run_after_three_takeovers,
);

/// Asserts the run finished: succeeded, every step succeeded with its output.
#[track_caller]
fn assert_all_succeeded(run: &Value, steps: u32) {
    assert_eq!(run["status"], "succeeded", "{run:#}");
    assert_eq!(run["cursor"], steps, "{run:#}");
    let rows = run["steps"].as_array().expect("steps");
    assert_eq!(rows.len(), steps as usize, "{run:#}");
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row["idx"], i, "{row:#}");
        assert_eq!(row["status"], "succeeded", "{row:#}");
        assert_eq!(row["attempt"], 1, "{row:#}");
        assert_eq!(row["output"]["step"], i, "step {i} has no output: {row:#}");
        assert_eq!(row["error"], Value::Null, "{row:#}");
    }
}

/// Asserts step `i` started `want(i)` times for every step.
#[track_caller]
fn assert_executions(case: &Case, want: impl Fn(u32) -> usize) {
    let log = case.executions();
    for i in 0..STEPS {
        let n = log.iter().filter(|&&x| x == i).count();
        assert_eq!(n, want(i), "step {i} executed {n} times; log: {log:?}");
    }
}

/// The run as the crash left it: `running`, cursor at `cursor`, that step's
/// row `running` and not yet taken over.
#[track_caller]
fn assert_stopped_at(run: &Value, cursor: u32) {
    assert_eq!(run["status"], "running", "{run:#}");
    assert_eq!(run["cursor"], cursor, "{run:#}");
    let rows = run["steps"].as_array().expect("steps");
    assert_eq!(rows.len(), cursor as usize + 1, "{run:#}");
    for row in &rows[..cursor as usize] {
        assert_eq!(row["status"], "succeeded", "{row:#}");
    }
    let at = step(run, cursor as usize);
    assert_eq!(at["status"], "running", "{at:#}");
    assert_eq!(at["takeovers"], 0, "{at:#}");
}

fn external_sigkill_mid_step_reruns_only_that_step(setup: Setup) {
    sigkill_mid_step_reruns_only_that_step(Case::new(setup));
}

/// The same on any database (also through a pooler, `pooler.rs`).
pub(crate) fn sigkill_mid_step_reruns_only_that_step(case: Case) {
    let crew = case.counting_crew(STEPS);
    let crew = crew.to_str().unwrap();
    // Step 18 lingers in the killed process only, so the kill surely lands
    // while it executes; the resume runs it at normal speed.
    let mut child = case.spawn(
        &["run", crew, "--input", r#"{"topic": "crash"}"#],
        &[("TEST_SLOW_STEP", &KILL_AT.to_string())],
    );
    let pid_file = case.path("slow.pid");
    wait_until(
        "step 18 to start",
        Duration::from_secs(60),
        || match child.try_wait().unwrap() {
            Some(status) => panic!(
                "cairn run exited ({status}) before step 18 started: {}",
                std::fs::read_to_string(case.path("bg.stderr")).unwrap_or_default()
            ),
            // The pid is fully written: the kill must not land between the
            // step creating the file and writing it.
            None => {
                std::fs::read_to_string(&pid_file).is_ok_and(|s| s.ends_with('\n'))
                    && case.executions().contains(&KILL_AT)
            }
        },
    );
    kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL).unwrap();
    let status = child.wait().unwrap();
    assert!(!status.success(), "{status}");
    // Step 18's program dies with the process that started it (parent-death
    // signal), so it cannot keep running beside its re-run.
    wait_until("the slow step's pid", Duration::from_secs(5), || {
        std::fs::read_to_string(&pid_file).is_ok_and(|s| s.ends_with('\n'))
    });
    let step_pid = read_pid(&pid_file);
    wait_until(
        "the killed run's step program to die",
        Duration::from_secs(5),
        || is_dead(step_pid),
    );
    // Its forked `sleep` is not reached by that signal: clean it up.
    let _ = killpg(Pid::from_raw(step_pid), Signal::SIGKILL);

    let id = case.only_run_id();
    assert_stopped_at(&case.show(&id), KILL_AT);
    assert_eq!(case.executions(), (0..=KILL_AT).collect::<Vec<_>>());

    let out = case.cairn(&["resume", &id, "--takeover"]).expect_code(0);
    out.expect_stderr(&["taken over"]);
    let run = case.show(&id);
    assert_all_succeeded(&run, STEPS);
    assert_executions(&case, |i| if i == KILL_AT { 2 } else { 1 });
    assert_eq!(step(&run, 18)["takeovers"], 1, "{:#}", step(&run, 18));
    for i in (0..STEPS as usize).filter(|&i| i != 18) {
        assert_eq!(step(&run, i)["takeovers"], 0, "{:#}", step(&run, i));
    }
    // The resume's own work started at step 18.
    let log = case.executions();
    assert_eq!(
        log[KILL_AT as usize + 1..],
        (KILL_AT..STEPS).collect::<Vec<_>>()
    );
}

fn failpoint_after_commit_resumes_at_the_next_step(setup: Setup) {
    let case = Case::new(setup);
    let crew = case.counting_crew(STEPS);
    case.killed_at(&["run", crew.to_str().unwrap()], "after_commit:18");
    let id = case.only_run_id();
    // Step 18's commit is durable and step 19 was marked running with it.
    let stopped = case.show(&id);
    assert_stopped_at(&stopped, KILL_AT + 1);
    assert_eq!(step(&stopped, 18)["output"]["step"], 18);
    let before = case.executions();
    assert_eq!(before, (0..=KILL_AT).collect::<Vec<_>>());

    case.cairn(&["resume", &id, "--takeover"]).expect_code(0);
    let run = case.show(&id);
    assert_all_succeeded(&run, STEPS);
    assert_executions(&case, |_| 1);
    // The resume began at step 19.
    assert_eq!(
        case.executions()[before.len()..],
        (KILL_AT + 1..STEPS).collect::<Vec<_>>()
    );
}

/// Killed just before the first claim (the run is submitted, nothing ran)
/// and just after it (step 0 marked running under a live lease, not yet
/// started): a resume runs every step exactly once. The claim is a
/// resume's of a submitted run (`cairn run` claims with its submit, see
/// `boundaries::start`).
fn failpoints_around_the_first_claim_lose_and_repeat_nothing(setup: Setup) {
    for point in ["before_claim:0", "after_claim:0"] {
        let case = Case::new(setup);
        let crew = case.counting_crew(STEPS);
        let id = case.submit(&crew);
        case.killed_at(&["resume", &id], point);
        let stopped = case.show(&id);
        if point.starts_with("before") {
            assert_eq!(stopped["status"], "queued", "{point}: {stopped:#}");
            assert_eq!(
                stopped["steps"],
                serde_json::json!([]),
                "{point}: {stopped:#}"
            );
        } else {
            assert_stopped_at(&stopped, 0);
        }
        assert!(case.executions().is_empty(), "{point}: a step ran");
        case.cairn(&["resume", &id, "--takeover"]).expect_code(0);
        assert_all_succeeded(&case.show(&id), STEPS);
        assert_executions(&case, |_| 1);
    }
}

fn failpoint_before_commit_reruns_the_uncommitted_step(setup: Setup) {
    let case = Case::new(setup);
    let crew = case.counting_crew(STEPS);
    case.killed_at(&["run", crew.to_str().unwrap()], "before_commit:18");
    let id = case.only_run_id();
    // Step 18 ran, but nothing of it was committed.
    let stopped = case.show(&id);
    assert_stopped_at(&stopped, KILL_AT);
    assert_eq!(step(&stopped, 18)["output"], Value::Null);
    let before = case.executions();
    assert_eq!(before, (0..=KILL_AT).collect::<Vec<_>>());

    case.cairn(&["resume", &id, "--takeover"]).expect_code(0);
    let run = case.show(&id);
    assert_all_succeeded(&run, STEPS);
    assert_executions(&case, |i| if i == KILL_AT { 2 } else { 1 });
    assert_eq!(step(&run, 18)["takeovers"], 1);
    assert_eq!(
        case.executions()[before.len()..],
        (KILL_AT..STEPS).collect::<Vec<_>>()
    );
}

/// DESIGN.md: "after a configured number of takeovers of the same attempt
/// (default 3) the run fails with error kind `crash_loop`". `plan_claim`
/// takes over while `takeovers + 1 <= 3`: the first run and three takeovers
/// execute step 2 (4 times in all); the 4th resume fails the run without
/// executing it.
fn crash_loop_cap_fails_the_run_after_three_takeovers(setup: Setup) {
    let case = Case::new(setup);
    let crew = case.counting_crew(4);
    let crash = [("CAIRN_FAILPOINTS", "before_commit:2")];
    case.cairn_env(&["run", crew.to_str().unwrap()], &crash)
        .expect_sigkill();
    let id = case.only_run_id();
    assert_eq!(case.executions(), vec![0, 1, 2]);
    assert_eq!(step(&case.show(&id), 2)["takeovers"], 0);

    for takeover in 1..=3 {
        case.cairn_env(&["resume", &id, "--takeover"], &crash)
            .expect_sigkill();
        let run = case.show(&id);
        assert_eq!(run["status"], "running", "{run:#}");
        let row = step(&run, 2);
        assert_eq!(row["status"], "running", "{row:#}");
        assert_eq!(row["attempt"], 1, "{row:#}");
        assert_eq!(row["takeovers"], takeover, "{row:#}");
        assert_eq!(case.executed(2), 1 + takeover);
    }

    // The 4th resume would be the 4th takeover: refused, the run fails.
    let out = case
        .cairn_env(&["resume", &id, "--takeover", "--json"], &crash)
        .expect_code(3);
    let run = out.json();
    assert_eq!(run, case.show(&id), "resume prints the stored run");
    assert_eq!(run["status"], "failed", "{run:#}");
    assert_eq!(run["cursor"], 2, "{run:#}");
    assert_eq!(run["error"]["kind"], "crash_loop", "{run:#}");
    let row = step(&run, 2);
    assert_eq!(row["status"], "failed", "{row:#}");
    assert_eq!(row["attempt"], 1, "{row:#}");
    assert_eq!(row["error"]["kind"], "crash_loop", "{row:#}");
    assert_eq!(row["error"]["retryable"], false, "{row:#}");
    assert_eq!(run["steps"].as_array().unwrap().len(), 3, "{run:#}");
    assert_eq!(case.executed(2), 4, "the capped step ran again");
    assert_eq!(case.executed(3), 0);

    // And it stays parked: a further resume is refused, nothing runs.
    let out = case.cairn(&["resume", &id]).expect_code(3);
    out.expect_stderr(&["retry"]);
    assert_eq!(case.executions(), vec![0, 1, 2, 2, 2, 2]);
}

both_backends!(a_step_program_whose_engine_died_before_its_death_signal_never_runs);

/// The children of process `pid` (every thread's), from `/proc`.
fn children_of(pid: u32) -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return vec![];
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|c| {
            c.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<i32>>()
        })
        .collect()
}

/// Issue 29.11: a step program forked just before its engine is SIGKILLed
/// reaches `PR_SET_PDEATHSIG` after the parent is gone, so no signal ever
/// comes. The failpoint holds the fork inside that window; the kill lands
/// there. The fork must see that its parent is no longer the spawner and not
/// run its side effect as an orphan, and the resume runs it exactly once.
fn a_step_program_whose_engine_died_before_its_death_signal_never_runs(kind: Kind) {
    let case = Case::new(kind);
    let effect = case.path("effect.log");
    let script = format!(
        "echo charged >> {}; echo '{{\"ok\": true}}'",
        effect.display()
    );
    let crew = case.write(
        "crew.toml",
        &crew_toml("orphan", &[agent_sh("charge", &script)]),
    );
    let mut engine = Spawned(case.spawn(
        &["run", crew.to_str().unwrap()],
        &[("CAIRN_FAILPOINTS", "pause_before_pdeathsig:1500")],
    ));
    let pid = engine.0.id();
    let mut forks = vec![];
    wait_until("the step's fork", Duration::from_secs(60), || {
        forks = children_of(pid);
        !forks.is_empty()
    });
    kill(engine.pid(), Signal::SIGKILL).unwrap();
    engine.wait("the killed engine");
    for fork in forks {
        wait_until("the orphaned fork to end", Duration::from_secs(10), || {
            is_dead(fork)
        });
    }
    assert!(
        !effect.exists(),
        "the step program ran after its engine died: {:?}",
        std::fs::read_to_string(&effect)
    );

    let id = case.only_run_id();
    case.cairn(&["resume", &id, "--takeover"]).expect_code(0);
    assert_eq!(std::fs::read_to_string(&effect).unwrap(), "charged\n");
}

both_backends!(a_step_program_whose_engine_died_reads_its_whole_context);

/// Issue 47 (CI, 2026-11-29): a step program's stdin was a pipe fed after
/// the spawn, so an engine SIGKILLed between the two closed it empty and
/// whatever the program had forked read a cut context as if whole, and
/// acted on it (a delegated child logged an empty topic). The kill here
/// lands right after the program's group is recorded, before a pipe would
/// have been fed; the program's forked reader, which outlives it, must
/// read the whole context. A plain resume then finishes the run.
fn a_step_program_whose_engine_died_reads_its_whole_context(kind: Kind) {
    let case = Case::new(kind);
    let got = case.path("got.json");
    let got = got.display();
    let script =
        format!("exec 3<&0; (sleep 0.3; cat <&3 > {got}.tmp; mv {got}.tmp {got}) & wait; echo '{{\"ok\": true}}'");
    let crew = case.write(
        "crew.toml",
        &crew_toml("reads", &[agent_sh("read", &script)]),
    );
    case.cairn_env(
        &[
            "run",
            crew.to_str().unwrap(),
            "--input",
            r#"{"topic": "moss"}"#,
        ],
        &[("CAIRN_FAILPOINTS", "after:record_events")],
    )
    .expect_sigkill();
    let got = case.path("got.json");
    wait_until("the forked reader", Duration::from_secs(10), || {
        got.exists()
    });
    let read = std::fs::read_to_string(&got).unwrap_or_default();
    assert!(
        read.contains("moss"),
        "the reader got a cut context: {read:?}"
    );

    let id = case.only_run_id();
    case.cairn(&["resume", &id]).expect_code(0);
    assert_eq!(case.show(&id)["status"], "succeeded");
}

both_backends!(
    a_killed_engines_forked_work_is_ended_before_its_step_runs_again,
    a_killed_workers_forked_work_is_ended_by_the_worker_taking_over,
);

/// Field `n` (counted from 1) of `/proc/PID/stat`, if the process exists.
fn stat_field(pid: i32, n: usize) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(n - 3).map(str::to_owned)
}

/// A process a step program forked, with its start time and process
/// group: SIGKILLed when dropped if still the same process, so a failing
/// test leaves it behind no more than a passing one.
struct Forked {
    pid: i32,
    start: Option<String>,
    group: Option<String>,
}

impl Forked {
    fn new(pid: i32) -> Forked {
        Forked {
            pid,
            start: stat_field(pid, 22),
            group: stat_field(pid, 5),
        }
    }
}

impl Drop for Forked {
    fn drop(&mut self) {
        if !is_dead(self.pid) && stat_field(self.pid, 22) == self.start {
            let _ = kill(Pid::from_raw(self.pid), Signal::SIGKILL);
        }
    }
}

/// A crew of one step, `sh -c "prepare; work"`: its first run forks its
/// work (a `sleep`, its pid in `work.pid`) and waits for it; a re-run finds
/// the work started and succeeds at once. Each run appends to `ran.log`.
fn forking_crew(case: &Case) -> std::path::PathBuf {
    let (ran, work) = (case.path("ran.log"), case.path("work.pid"));
    let (ran, work) = (ran.display(), work.display());
    let script = format!(
        "cat >/dev/null; echo ran >> {ran}; \
         if [ ! -e {work} ]; then sleep 300 & echo $! > {work}.tmp; mv {work}.tmp {work}; wait; fi; \
         echo '{{\"ok\": true}}'"
    );
    case.write(
        "crew.toml",
        &crew_toml("forks", &[agent_sh("work", &script)]),
    )
}

/// Once `engine` started the step's work: SIGKILLs it, and checks that the
/// work outlived it (the parent-death signal ended only `sh`).
fn kill_engine_mid_work(case: &Case, mut engine: Spawned) -> Forked {
    let work = case.path("work.pid");
    wait_until("the step's forked work", Duration::from_secs(60), || {
        work.exists()
    });
    let forked = Forked::new(read_pid(&work));
    kill(engine.pid(), Signal::SIGKILL).unwrap();
    engine.wait("the killed engine");
    std::thread::sleep(Duration::from_millis(200));
    assert!(!is_dead(forked.pid), "the forked work died with its engine");
    forked
}

/// The takeover ended the work, and the step ran once more and succeeded.
#[track_caller]
fn assert_ended_and_rerun(case: &Case, id: &str, forked: &Forked) {
    wait_until(
        "the forked work to be ended",
        Duration::from_secs(5),
        || is_dead(forked.pid),
    );
    let run = case.show(id);
    assert_eq!(run["status"], "succeeded", "{run:#}");
    assert_eq!(step(&run, 0)["takeovers"], 1, "{run:#}");
    let ran = std::fs::read_to_string(case.path("ran.log")).unwrap();
    assert_eq!(ran, "ran\nran\n", "the step ran once, then once again");
    // The first run's record names the group the work ran in.
    let started = case.events_of(id, "program_started");
    assert_eq!(started.len(), 2, "{started:#?}");
    let pgid = started[0]["data"]["pgid"].to_string();
    assert_eq!(Some(pgid), forked.group, "{started:#?}");
}

/// Issue 46.7: a step program `sh -c "prepare; work"` whose `cairn run` is
/// SIGKILLed. The parent-death signal ends `sh`, not the work it forked,
/// which keeps running in the program's process group. A plain resume
/// proves the holder dead, ends that group before the step runs again,
/// and runs the step once more: nothing of the first run is left beside it.
fn a_killed_engines_forked_work_is_ended_before_its_step_runs_again(kind: Kind) {
    let case = Case::new(kind);
    let crew = forking_crew(&case);
    let engine = Spawned(case.spawn(&["run", crew.to_str().unwrap()], &[]));
    let forked = kill_engine_mid_work(&case, engine);
    let id = case.only_run_id();
    let out = case.cairn(&["resume", &id]).expect_code(0);
    out.expect_stderr(&["taken over"]);
    assert_ended_and_rerun(&case, &id, &forked);
}

/// The same with workers: the one that takes the run over once its lease
/// expired ends the killed worker's group before it runs the step again.
fn a_killed_workers_forked_work_is_ended_by_the_worker_taking_over(kind: Kind) {
    let case = Case::new(kind);
    let id = case.submit(&forking_crew(&case));
    let args = ["worker", "--lease-ms", "800", "--heartbeat-ms", "200"];
    let args = [&args[..], &["--poll-ms", "50"]].concat();
    let worker = Spawned(case.spawn(&args, &[]));
    let forked = kill_engine_mid_work(&case, worker);
    let _taker = Spawned(case.spawn(&args, &[]));
    wait_until("the run to finish", Duration::from_secs(30), || {
        case.show(&id)["status"] == "succeeded"
    });
    assert_ended_and_rerun(&case, &id, &forked);
}
