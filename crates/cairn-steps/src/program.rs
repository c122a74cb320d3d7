//! Running a program in its own process group: the spawn (a clean
//! environment, the crew's directory, the parent-death signal), its stdin
//! and outputs, and the group's end. Shared by `command` steps
//! ([`crate::CommandAgent`]) and `llm` agents' command tools
//! ([`run_program`]).

use std::process::Stdio;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use cairn_core::{ErrorInfo, ErrorKind};

use crate::group::ProgramGroup;
use crate::ProgramEnv;

/// How much of stderr a failure keeps.
const STDERR_TAIL: usize = 2000;

/// Asks the kernel to SIGKILL the program when the process that started it
/// dies (Linux `PR_SET_PDEATHSIG`). The group kill below covers every normal
/// end of a step; this covers the one it cannot: our own process being
/// SIGKILLed, which would otherwise leave the program running beside its
/// re-run. It reaches the program itself, not processes it forked: those a
/// takeover ends (`crate::group`).
///
/// A parent that dies between the fork and the `prctl` sends no signal: the
/// child would run its side effect as an orphan while a takeover runs it
/// again. So after setting the signal the child checks that its parent is
/// still the process that spawned it, and does not exec if not.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn die_with_parent(cmd: &mut Command) {
    let spawner = nix::unistd::getpid();
    let pause = pause_before_pdeathsig();
    // SAFETY: the closure runs in the forked child before exec and only
    // calls prctl(2), getppid(2) and (in tests) nanosleep(2), which are
    // async-signal-safe; the errors are made from an errno, without
    // allocating.
    unsafe {
        cmd.pre_exec(move || {
            if let Some(pause) = pause {
                std::thread::sleep(pause);
            }
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)?;
            if nix::unistd::getppid() != spawner {
                return Err(std::io::Error::from(nix::errno::Errno::ESRCH));
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_cmd: &mut Command) {}

/// Test-only: `pause_before_pdeathsig:MS` in `CAIRN_FAILPOINTS` holds the
/// forked program that long before it asks for its parent-death signal, so
/// a test can kill Cairn inside the window the parent check closes.
#[cfg(all(target_os = "linux", feature = "failpoints"))]
fn pause_before_pdeathsig() -> Option<std::time::Duration> {
    let spec = std::env::var("CAIRN_FAILPOINTS").ok()?;
    spec.split(',')
        .find_map(|p| {
            p.trim()
                .strip_prefix("pause_before_pdeathsig:")?
                .parse()
                .ok()
        })
        .map(std::time::Duration::from_millis)
}

#[cfg(all(target_os = "linux", not(feature = "failpoints")))]
fn pause_before_pdeathsig() -> Option<std::time::Duration> {
    None
}

/// Kills a process group when dropped.
struct GroupGuard(Option<i32>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pgid) = self.0 {
            // ESRCH (already gone) is the normal case after a clean exit.
            let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
        }
    }
}

fn tail(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    if text.len() <= STDERR_TAIL {
        return text.to_owned();
    }
    let mut start = text.len() - STDERR_TAIL;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &text[start..])
}

/// What a finished program left behind.
#[derive(Debug)]
pub struct Finished {
    pub status: std::process::ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// Runs `argv` in its own process group with `stdin`, the variables `base`
/// selects from Cairn's environment and the `extra` ones, and waits for it.
/// The group is killed when the returned future is dropped (a timeout, a
/// cancel), and the program dies with this process (Linux). Shared by
/// `command` steps and `llm` agents' command tools.
pub async fn run_program(
    argv: &[String],
    stdin: Vec<u8>,
    base: &ProgramEnv,
    extra: &[(&str, String)],
) -> Result<Finished, ErrorInfo> {
    Program::spawn(argv, base, extra)?.finish(stdin).await
}

/// A program started in its own process group, not yet given its stdin.
/// Dropping it kills the group.
pub(crate) struct Program {
    child: tokio::process::Child,
    name: String,
    _group: GroupGuard,
}

impl Program {
    /// Starts `argv` as [`run_program`] does.
    pub(crate) fn spawn(
        argv: &[String],
        base: &ProgramEnv,
        extra: &[(&str, String)],
    ) -> Result<Program, ErrorInfo> {
        let (program, args) = argv
            .split_first()
            .ok_or_else(|| ErrorInfo::new(ErrorKind::Crew, "the `command` is empty", false))?;
        let mut cmd = command_in(program, base.dir.as_deref())?;
        die_with_parent(&mut cmd);
        cmd.args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        cmd.env_clear().envs(base.select(std::env::vars()));
        for (k, v) in extra {
            cmd.env(k, v);
        }
        let child = cmd.spawn().map_err(|e| {
            let retryable = e.kind() != std::io::ErrorKind::NotFound
                && e.kind() != std::io::ErrorKind::PermissionDenied;
            ErrorInfo::new(
                ErrorKind::Spawn,
                format!("cannot start `{program}`: {e}"),
                retryable,
            )
        })?;
        let group = GroupGuard(child.id().and_then(|id| i32::try_from(id).ok()));
        Ok(Program {
            child,
            name: program.clone(),
            _group: group,
        })
    }

    /// Its process group's record, read at once (nothing reaps the program
    /// before [`Program::finish`] waits for it).
    pub(crate) fn group(&self) -> Option<ProgramGroup> {
        self.child.id().and_then(ProgramGroup::of_spawned)
    }

    /// Writes `stdin`, closes it and waits for the program; the group is
    /// killed when this returns or is dropped.
    pub(crate) async fn finish(mut self, stdin: Vec<u8>) -> Result<Finished, ErrorInfo> {
        let pipe = self.child.stdin.take();
        let write = async move {
            if let Some(mut pipe) = pipe {
                // A program that ignores stdin may exit first: EPIPE is fine.
                let _ = pipe.write_all(&stdin).await;
                let _ = pipe.shutdown().await;
            }
        };
        let program = self.name;
        let ((), out) = tokio::join!(write, self.child.wait_with_output());
        let out = out.map_err(|e| {
            ErrorInfo::new(
                ErrorKind::Spawn,
                format!("waiting for `{program}`: {e}"),
                true,
            )
        })?;
        Ok(Finished {
            status: out.status,
            stdout: out.stdout,
            stderr: out.stderr,
        })
    }
}

/// The command for `program`, run in `dir` (the crew's directory), where a
/// relative path with a `/` (`./tool.sh`) is found too.
fn command_in(program: &str, dir: Option<&std::path::Path>) -> Result<Command, ErrorInfo> {
    let Some(dir) = dir else {
        return Ok(Command::new(program));
    };
    if !dir.is_dir() {
        return Err(ErrorInfo::new(
            ErrorKind::Spawn,
            format!(
                "cannot start `{program}`: the crew's directory {} does not exist here \
                 (commands run in the directory of the crew file they were loaded from)",
                dir.display()
            ),
            false,
        ));
    }
    let path = std::path::Path::new(program);
    let mut cmd = match path.is_relative() && program.contains('/') {
        true => Command::new(dir.join(path)),
        false => Command::new(program),
    };
    cmd.current_dir(dir);
    Ok(cmd)
}

/// How a program failed, with the tail of its stderr: `None` if it succeeded.
pub fn failure_message(program: &str, out: &Finished) -> Option<String> {
    if out.status.success() {
        return None;
    }
    let how = match out.status.code() {
        Some(code) => format!("exited with status {code}"),
        None => "was killed by a signal".to_owned(),
    };
    let stderr = tail(&out.stderr);
    Some(if stderr.is_empty() {
        format!("`{program}` {how}")
    } else {
        format!("`{program}` {how}: {stderr}")
    })
}
