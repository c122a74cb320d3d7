//! Lease holders a process can prove dead: the owner string a CLI or worker
//! records with its lease names its host, boot, pid and the pid's start
//! time, so a later `resume` on the same machine can tell a crashed holder
//! (no such process, or the pid reused by another) from a live one without
//! waiting for the lease to expire. Linux's `/proc` only; elsewhere no
//! holder is ever proved dead, and a live lease still needs `--takeover`.
//! The same proof, made of the process that started a `command` step's
//! program, lets a takeover end what that program forked ([`Programs`]).

use cairn_steps::procfs::{Machine, Stat};

/// This process as a lease owner: `LABEL:PID [HOST BOOT START]`, where
/// BOOT is the kernel's boot id and START the process's start time in
/// clock ticks since boot. Just `LABEL:PID` where `/proc` is missing.
pub fn owner(label: &str) -> String {
    let pid = std::process::id();
    match Identity::of(pid) {
        Some(id) => format!("{label}:{pid} [{} {} {}]", id.host, id.boot, id.start),
        None => format!("{label}:{pid}"),
    }
}

/// Whether the process that recorded `owner` is provably gone: it ran on
/// this host in this boot, and its pid now names no process, a zombie, or
/// a process started at another time. Anything else (another host, an
/// owner without the identity, no `/proc`) is not proof.
pub fn is_dead_here(owner: &str) -> bool {
    let Some((pid, recorded)) = parse(owner) else {
        return false;
    };
    let Some(me) = Identity::of(std::process::id()) else {
        return false;
    };
    if recorded.host != me.host || recorded.boot != me.boot {
        return false;
    }
    match Stat::of(pid) {
        None => true,
        Some(stat) => stat.zombie || stat.start != recorded.start,
    }
}

#[derive(Debug, PartialEq)]
struct Identity {
    host: String,
    boot: String,
    start: u64,
}

impl Identity {
    fn of(pid: u32) -> Option<Identity> {
        let here = Machine::here()?;
        let start = Stat::of(pid)?.start;
        // The owner is split on spaces: a name with one cannot be matched.
        let (host, boot) = (here.host.clone(), here.boot.clone());
        (!host.contains(char::is_whitespace) && !boot.contains(char::is_whitespace))
            .then_some(Identity { host, boot, start })
    }
}

/// Ends, at each takeover, the process groups of `command` steps whose
/// engine (this machine's process that started them) is gone
/// ([`cairn_steps::reap`]).
pub(crate) struct Programs;

impl cairn_scheduler::Reaper for Programs {
    fn reap(&self, run: cairn_core::RunId, events: &[cairn_core::EventRecord]) {
        cairn_steps::reap(run, events);
    }
}

/// The pid and identity an owner string records, if it has them.
fn parse(owner: &str) -> Option<(u32, Identity)> {
    let (head, tail) = owner.split_once(" [")?;
    let pid = head.rsplit_once(':')?.1.parse().ok()?;
    let mut parts = tail.strip_suffix(']')?.split(' ');
    let (host, boot, start) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let identity = Identity {
        host: host.to_owned(),
        boot: boot.to_owned(),
        start: start.parse().ok()?,
    };
    Some((pid, identity))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owner_string_parses_back() {
        let id = Identity {
            host: "box".into(),
            boot: "b00t".into(),
            start: 42,
        };
        assert_eq!(
            parse("cairn-cli:7 [box b00t 42]"),
            Some((7, id)),
            "the recorded identity"
        );
        assert_eq!(parse("cairn-cli:7"), None, "an owner without one");
        assert_eq!(parse("cairn-cli:x [box b00t 42]"), None, "no pid");
        assert_eq!(parse("a:7 [box b00t 42 more]"), None, "extra fields");
    }

    #[test]
    fn this_process_is_alive_and_a_reused_pid_is_not_its_holder() {
        let me = owner("test");
        if !me.contains('[') {
            return; // no /proc here: nothing is ever proved dead
        }
        assert!(!is_dead_here(&me), "this process is alive: {me}");
        // The same pid with another start time: a reused pid, so dead.
        let Some((pid, id)) = parse(&me) else {
            panic!("this process's owner does not parse: {me}");
        };
        let reused = format!("test:{pid} [{} {} {}]", id.host, id.boot, id.start + 1);
        assert!(is_dead_here(&reused));
        // Another host's holder is never proved dead from here.
        let remote = format!("test:{pid} [elsewhere {} {}]", id.boot, id.start + 1);
        assert!(!is_dead_here(&remote));
    }
}
