//! What Linux's `/proc` says of processes and of this machine: the few facts
//! Cairn uses to tell a process it knows (a lease holder, a step program's
//! process group) from another that reuses its pid. Where `/proc` is
//! missing every read is `None` or empty, and nothing is ever proved.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::sync::OnceLock;

/// What `/proc/PID/stat` says of a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// A zombie (or dead) process: it has exited and awaits its reaper.
    pub zombie: bool,
    /// Its process group.
    pub pgrp: i32,
    /// When it started, in clock ticks since boot.
    pub start: u64,
}

impl Stat {
    pub fn of(pid: u32) -> Option<Stat> {
        parse_stat(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
    }
}

/// The state (field 3), process group (field 5) and start time (field 22)
/// of a `/proc/PID/stat` line; the command name (field 2) may hold spaces
/// and parentheses, so fields are counted after its last `)`.
pub fn parse_stat(line: &str) -> Option<Stat> {
    let rest = &line[line.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(Stat {
        zombie: matches!(*fields.first()?, "Z" | "X"),
        pgrp: fields.get(2)?.parse().ok()?,
        start: fields.get(19)?.parse().ok()?,
    })
}

/// Where a pid means something: the machine, its boot, and the pid
/// namespace of this process. Two processes agree on what a pid names
/// only if all three are equal.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Machine {
    pub host: String,
    /// The kernel's boot id: a reboot ended every process.
    pub boot: String,
    /// The pid namespace, as `/proc/self/ns/pid` names it (`pid:[N]`).
    pub pidns: String,
}

impl Machine {
    /// This process's, read once (none of it changes while it lives).
    pub fn here() -> Option<&'static Machine> {
        static HERE: OnceLock<Option<Machine>> = OnceLock::new();
        HERE.get_or_init(|| {
            let read = |p: &str| fs::read_to_string(p).ok().map(|s| s.trim().to_owned());
            let pidns = fs::read_link("/proc/self/ns/pid").ok()?;
            Some(Machine {
                host: read("/proc/sys/kernel/hostname")?,
                boot: read("/proc/sys/kernel/random/boot_id")?,
                pidns: pidns.to_str()?.to_owned(),
            })
        })
        .as_ref()
    }
}

/// The live processes of each of `groups`, from one pass over `/proc`.
pub fn members(groups: &HashSet<i32>) -> HashMap<i32, Vec<u32>> {
    let mut found: HashMap<i32, Vec<u32>> = HashMap::new();
    let Ok(dir) = fs::read_dir("/proc") else {
        return found;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        if let Some(stat) = Stat::of(pid).filter(|s| groups.contains(&s.pgrp)) {
            found.entry(stat.pgrp).or_default().push(pid);
        }
    }
    found
}

/// Whether process `pid`'s environment holds `entry` (`NAME=value`)
/// exactly. Unreadable (another user's, gone): no.
pub fn environ_has(pid: u32, entry: &str) -> bool {
    fs::read(format!("/proc/{pid}/environ"))
        .is_ok_and(|env| env.split(|&b| b == 0).any(|e| e == entry.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_with_spaces_and_parens_in_its_name_parses() {
        let line = "12 (a (b) c) S 1 12 12 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 \
                    98765 1000 100 18446744073709551615";
        let stat = parse_stat(line);
        let want = Stat {
            zombie: false,
            pgrp: 12,
            start: 98765,
        };
        assert_eq!(stat, Some(want));
        let zombie = "12 (x) Z 1 7 12 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 5 0 0";
        assert_eq!(
            parse_stat(zombie).map(|s| (s.zombie, s.pgrp)),
            Some((true, 7))
        );
    }

    #[test]
    fn this_process_is_found_in_its_group_with_its_environment() {
        let me = std::process::id();
        let Some(stat) = Stat::of(me) else {
            return; // no /proc here
        };
        let groups = HashSet::from([stat.pgrp]);
        assert!(members(&groups)[&stat.pgrp].contains(&me));
        // Set by cargo when it started this process.
        let Ok(dir) = std::env::var("CARGO_MANIFEST_DIR") else {
            return;
        };
        assert!(environ_has(me, &format!("CARGO_MANIFEST_DIR={dir}")));
        assert!(!environ_has(me, &format!("CARGO_MANIFEST_DIR={dir}-not")));
        assert!(!environ_has(me, "CARGO_MANIFEST_DIR"));
        assert!(Machine::here().is_some_and(|m| m.pidns.starts_with("pid:[")));
    }
}
