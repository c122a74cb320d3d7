//! Step timeouts, both backends: a `command` step past its `timeout_ms`
//! fails promptly with error kind `timeout`, and its whole process group
//! (the step and a background child it spawned) is gone afterwards.

use std::time::{Duration, Instant};

use crate::support::{agent_command, crew_toml, is_dead, read_pid, step, wait_until, Case, Kind};

both_backends!(timed_out_step_fails_and_its_process_group_is_killed);

fn timed_out_step_fails_and_its_process_group_is_killed(kind: Kind) {
    let case = Case::new(kind);
    let main_pid = case.path("main.pid");
    let bg_pid = case.path("bg.pid");
    let script = case.write(
        "sleeper.sh",
        &format!(
            "echo $$ > {main}.tmp && mv {main}.tmp {main}\n\
             sleep 30 &\n\
             echo $! > {bg}.tmp && mv {bg}.tmp {bg}\n\
             cat > /dev/null\n\
             exec sleep 60\n",
            main = main_pid.display(),
            bg = bg_pid.display()
        ),
    );
    let agent = format!(
        "{}timeout_ms = 200\n",
        agent_command("sleeper", &["sh", script.to_str().unwrap()])
    );
    let crew = case.write("crew.toml", &crew_toml("sleepy", &[agent]));

    let started = Instant::now();
    let run = case.run_json(&crew, 3);
    // Not a speed check: a step that was not cut off would have slept 60 s.
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(30),
        "the step was not cut off: {took:?}"
    );

    assert_eq!(run["status"], "failed", "{run:#}");
    let row = step(&run, 0);
    assert_eq!(row["status"], "failed", "{row:#}");
    assert_eq!(row["error"]["kind"], "timeout", "{row:#}");
    assert_eq!(run["error"]["kind"], "timeout", "{run:#}");
    let message = row["error"]["message"].as_str().unwrap();
    assert!(message.contains("200 ms"), "{message}");

    // Both processes of the step's group were killed with it.
    for pid_file in [&main_pid, &bg_pid] {
        let pid = read_pid(pid_file);
        wait_until(
            &format!("pid {pid} ({}) to die", pid_file.display()),
            Duration::from_secs(2),
            || is_dead(pid),
        );
    }
}
