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

/// The program's stdin, which never shows a cut context as if whole. A
/// pipe fed after the spawn would: a SIGKILL of this process closes it
/// early, and the program (until its parent-death signal lands) and what
/// it forked read the part written so far, then an end of file, and act
/// on it. So on Linux the whole input is in the pipe before the spawn and
/// its end comes only when [`Program::finish`] closes the write end, once
/// the group is recorded (or when this process dies: the input is whole
/// either way). An input larger than a pipe can hold goes in a memory file
/// (`memfd_create(2)`), whole from the start. Elsewhere, a pipe fed after
/// the spawn.
enum Input {
    /// The read end for the spawn, the write end held until `finish`.
    #[cfg(target_os = "linux")]
    Filled {
        read: Option<std::os::fd::OwnedFd>,
        _write: std::os::fd::OwnedFd,
    },
    #[cfg(target_os = "linux")]
    File(std::fs::File),
    Fed(Vec<u8>),
}

impl Input {
    #[cfg(target_os = "linux")]
    fn new(bytes: Vec<u8>) -> std::io::Result<Input> {
        if let Some((read, write)) = filled_pipe(&bytes)? {
            return Ok(Input::Filled {
                read: Some(read),
                _write: write,
            });
        }
        memory_file(&bytes).map(Input::File)
    }

    #[cfg(not(target_os = "linux"))]
    fn new(bytes: Vec<u8>) -> std::io::Result<Input> {
        Ok(Input::Fed(bytes))
    }

    fn stdio(&mut self) -> std::io::Result<Stdio> {
        match self {
            #[cfg(target_os = "linux")]
            Input::Filled { read, .. } => read
                .take()
                .map(Stdio::from)
                .ok_or_else(|| std::io::Error::other("stdin given twice")),
            #[cfg(target_os = "linux")]
            Input::File(file) => Ok(Stdio::from(file.try_clone()?)),
            Input::Fed(_) => Ok(Stdio::piped()),
        }
    }

    /// What is left to write into the stdin pipe after the spawn; the
    /// write end of a filled pipe closes with this.
    fn rest(self) -> Vec<u8> {
        match self {
            Input::Fed(bytes) => bytes,
            #[cfg(target_os = "linux")]
            _ => Vec::new(),
        }
    }
}

/// A pipe (both ends close-on-exec) already holding `bytes`, or `None` if
/// no pipe this process may make holds that much.
#[cfg(target_os = "linux")]
fn filled_pipe(
    bytes: &[u8],
) -> std::io::Result<Option<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)>> {
    use nix::fcntl::{fcntl, FcntlArg, OFlag};
    use std::io::Write;
    use std::os::fd::AsRawFd;
    let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
    // Never smaller than the usual 64 KiB: a larger input asks for more.
    let want = i32::try_from(bytes.len().max(1 << 16)).unwrap_or(i32::MAX);
    let size = match fcntl(write.as_raw_fd(), FcntlArg::F_SETPIPE_SZ(want)) {
        Ok(size) => size,
        // Past the system's pipe-max-size (EPERM): a memory file instead.
        Err(_) => return Ok(None),
    };
    if usize::try_from(size).unwrap_or(0) < bytes.len() {
        return Ok(None);
    }
    let mut file = std::fs::File::from(write);
    file.write_all(bytes)?;
    Ok(Some((read, file.into())))
}

/// A memory file holding `bytes`, positioned at its start.
#[cfg(target_os = "linux")]
fn memory_file(bytes: &[u8]) -> std::io::Result<std::fs::File> {
    use nix::sys::memfd::{memfd_create, MemFdCreateFlag};
    use std::io::{Seek, Write};
    let fd = memfd_create(c"cairn-stdin", MemFdCreateFlag::MFD_CLOEXEC)?;
    let mut file = std::fs::File::from(fd);
    file.write_all(bytes)?;
    file.rewind()?;
    Ok(file)
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
    Program::spawn(argv, stdin, base, extra)?.finish().await
}

/// A program started in its own process group with its stdin. Dropping it
/// kills the group.
pub(crate) struct Program {
    child: tokio::process::Child,
    name: String,
    /// Its stdin's write end, held until `finish` (Linux), or what is
    /// still to be written into the pipe.
    input: Input,
    _group: GroupGuard,
}

impl Program {
    /// Starts `argv` as [`run_program`] does.
    pub(crate) fn spawn(
        argv: &[String],
        stdin: Vec<u8>,
        base: &ProgramEnv,
        extra: &[(&str, String)],
    ) -> Result<Program, ErrorInfo> {
        let (program, args) = argv
            .split_first()
            .ok_or_else(|| ErrorInfo::new(ErrorKind::Crew, "the `command` is empty", false))?;
        let mut cmd = command_in(program, base.dir.as_deref())?;
        die_with_parent(&mut cmd);
        let spawn_error = |e: std::io::Error| {
            let retryable = e.kind() != std::io::ErrorKind::NotFound
                && e.kind() != std::io::ErrorKind::PermissionDenied;
            ErrorInfo::new(
                ErrorKind::Spawn,
                format!("cannot start `{program}`: {e}"),
                retryable,
            )
        };
        let mut input = Input::new(stdin).map_err(spawn_error)?;
        cmd.args(args)
            .stdin(input.stdio().map_err(spawn_error)?)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        cmd.env_clear().envs(base.select(std::env::vars()));
        for (k, v) in extra {
            cmd.env(k, v);
        }
        let child = cmd.spawn().map_err(spawn_error)?;
        let group = GroupGuard(child.id().and_then(|id| i32::try_from(id).ok()));
        Ok(Program {
            child,
            name: program.clone(),
            input,
            _group: group,
        })
    }

    /// Its process group's record, read at once (nothing reaps the program
    /// before [`Program::finish`] waits for it).
    pub(crate) fn group(&self) -> Option<ProgramGroup> {
        self.child.id().and_then(ProgramGroup::of_spawned)
    }

    /// Writes what is left of its stdin into the pipe (if any), closes it
    /// and waits for the program; the group is killed when this returns or
    /// is dropped.
    pub(crate) async fn finish(self) -> Result<Finished, ErrorInfo> {
        self.finish_watching(|_| {}).await
    }

    /// [`Program::finish`], handing each stderr line to `on_line` as it is
    /// read (a program's `cairn-publish:` lines are recorded while it
    /// runs); stderr is kept whole all the same.
    pub(crate) async fn finish_watching(
        mut self,
        mut on_line: impl FnMut(&str) + Send,
    ) -> Result<Finished, ErrorInfo> {
        use tokio::io::{AsyncBufReadExt, AsyncReadExt};
        let pipe = self.child.stdin.take();
        let stdin = std::mem::replace(&mut self.input, Input::Fed(Vec::new())).rest();
        let write = async move {
            if let Some(mut pipe) = pipe {
                // A program that ignores stdin may exit first: EPIPE is fine.
                let _ = pipe.write_all(&stdin).await;
                let _ = pipe.shutdown().await;
            }
        };
        let (out_pipe, err_pipe) = (self.child.stdout.take(), self.child.stderr.take());
        let read_out = async move {
            let mut out = Vec::new();
            if let Some(mut p) = out_pipe {
                p.read_to_end(&mut out).await?;
            }
            Ok::<_, std::io::Error>(out)
        };
        let read_err = async {
            let mut all = Vec::new();
            if let Some(p) = err_pipe {
                let mut lines = tokio::io::BufReader::new(p);
                let mut line = Vec::new();
                while lines.read_until(b'\n', &mut line).await? > 0 {
                    on_line(&String::from_utf8_lossy(&line));
                    all.append(&mut line);
                }
            }
            Ok::<_, std::io::Error>(all)
        };
        let program = self.name;
        let (_, stdout, stderr, status) =
            tokio::join!(write, read_out, read_err, self.child.wait());
        let failed = |e: std::io::Error| {
            ErrorInfo::new(
                ErrorKind::Spawn,
                format!("waiting for `{program}`: {e}"),
                true,
            )
        };
        Ok(Finished {
            status: status.map_err(failed)?,
            stdout: stdout.map_err(failed)?,
            stderr: stderr.map_err(failed)?,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every size reaches the program whole: the usual pipe, a pipe made
    /// larger, and past any pipe (a memory file on Linux).
    #[tokio::test]
    async fn a_programs_stdin_arrives_whole_at_every_size() {
        let argv: Vec<String> = ["sh", "-c", "wc -c"].map(String::from).into();
        for size in [0, 10, 200 << 10, 4 << 20] {
            let input = vec![b'x'; size];
            let out = run_program(&argv, input, &ProgramEnv::default(), &[])
                .await
                .unwrap_or_else(|e| panic!("{e:?}"));
            let counted = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            assert_eq!(counted, size.to_string(), "an input of {size} bytes");
        }
    }
}
