//! The faults dealt to a [`Fleet`] (`fleet.rs`), each written down as a
//! [`FaultWindow`] on the history's clock: processes killed, paused and
//! restarted; PostgreSQL restarted, paused, made read-only, its WAL disk
//! filled, failed over; and through each process's proxy, its database
//! traffic delayed, its acknowledgements lost, its connections reset,
//! partitioned off, redirected to a standby.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use cairn_history::FaultWindow;
use nix::sys::signal::Signal;

use super::fleet::{Fleet, LEASE_MS, SERVER, WORKERS};
use super::history::{now_ns, Recorder, Rng};

/// The faults, dealt in turn so that a short campaign has each at least
/// once; which worker each one hits is the seed's choice.
pub struct Nemesis {
    rng: Rng,
    next: usize,
    windows: Vec<FaultWindow>,
    counts: BTreeMap<&'static str, usize>,
}

/// On PostgreSQL with a proxy per process: every fault.
const FAULTS: [&str; 13] = [
    "kill-worker",
    "lose-answers",
    "pause-worker",
    "pause-postgres",
    "kill-server",
    "delay",
    "postgres-fast-restart",
    "partition",
    "read-only",
    "reset",
    "disk-full",
    "redirect",
    "postgres-immediate-restart",
];

/// On SQLite: the processes' faults and a full disk.
const SQLITE_FAULTS: [&str; 4] = ["kill-worker", "pause-worker", "disk-full", "kill-server"];

/// With a standby: processes' faults around one failover.
const FAILOVER_FAULTS: [&str; 4] = ["kill-worker", "failover", "pause-worker", "kill-server"];

/// After the failover: the faults that need neither proxies nor a disk.
const PROMOTED_FAULTS: [&str; 7] = [
    "kill-worker",
    "pause-postgres",
    "pause-worker",
    "postgres-fast-restart",
    "kill-server",
    "read-only",
    "postgres-immediate-restart",
];

/// The faults `fleet` can be dealt now.
fn faults(fleet: &Fleet) -> &'static [&'static str] {
    match (&fleet.cluster, &fleet.standby) {
        (Some(_), Some(_)) => &FAILOVER_FAULTS,
        (Some(_), None) if fleet.proxies.is_empty() => &PROMOTED_FAULTS,
        (Some(_), None) => &FAULTS,
        (None, _) => &SQLITE_FAULTS,
    }
}

/// How long after a fault healed its window still runs, at least: the
/// operations that complete meanwhile still show the fault's aftermath.
/// It runs on until every kind of operation the clients use was
/// acknowledged since the fault began (so a window is never vacuous by a
/// lull of the workload), at most [`MAX_AFTERMATH`]: a fleet that has not
/// recovered by then is reported vacuous by the checker.
const MIN_AFTERMATH: Duration = Duration::from_secs(1);
const MAX_AFTERMATH: Duration = Duration::from_secs(8);

impl Nemesis {
    pub fn new(seed: u64) -> Nemesis {
        Nemesis {
            rng: Rng::new(seed ^ 0x5eed),
            next: 0,
            windows: vec![],
            counts: BTreeMap::new(),
        }
    }

    /// Deals the next fault and waits until it healed, then its
    /// aftermath, while the clients record into `recorder`.
    pub fn strike(&mut self, fleet: &mut Fleet, recorder: &Recorder) {
        let faults = faults(fleet);
        let fault = faults[self.next % faults.len()];
        self.next += 1;
        let start_ns = now_ns();
        // A worker, or for the proxies' faults any process (the server too).
        let worker = self.rng.below(WORKERS as u64) as usize;
        let process = self.rng.below(WORKERS as u64 + 1) as usize;
        match fault {
            "kill-worker" | "pause-worker" | "kill-server" => process_fault(fleet, fault, worker),
            "delay" | "lose-answers" | "partition" | "reset" | "redirect" => {
                proxy_fault(fleet, fault, process)
            }
            _ => database_fault(fleet, fault),
        }
        let healed = Instant::now();
        std::thread::sleep(MIN_AFTERMATH);
        while healed.elapsed() < MAX_AFTERMATH && !recorder.every_kind_acknowledged_since(start_ns)
        {
            std::thread::sleep(Duration::from_millis(100));
        }
        self.windows.push(FaultWindow {
            nemesis: fault.to_owned(),
            start_ns,
            end_ns: now_ns(),
        });
        *self.counts.entry(fault).or_default() += 1;
    }

    pub fn windows(&self) -> Vec<FaultWindow> {
        self.windows.clone()
    }

    pub fn summary(&self) -> String {
        let parts: Vec<String> = self
            .counts
            .iter()
            .map(|(f, n)| format!("{f} ×{n}"))
            .collect();
        parts.join(", ")
    }
}

/// A worker (`worker`) or the server killed and started again, or a
/// worker paused for longer than its lease.
fn process_fault(fleet: &mut Fleet, fault: &str, worker: usize) {
    match fault {
        "kill-worker" => {
            Fleet::signal(&fleet.workers[worker], Signal::SIGKILL);
            let _ = fleet.workers[worker].wait();
            std::thread::sleep(Duration::from_millis(500));
            fleet.workers[worker] = fleet.spawn_worker(worker);
        }
        "pause-worker" => {
            Fleet::signal(&fleet.workers[worker], Signal::SIGSTOP);
            std::thread::sleep(Duration::from_millis(LEASE_MS + 1000));
            Fleet::signal(&fleet.workers[worker], Signal::SIGCONT);
        }
        _ => {
            if let Some(mut server) = fleet.server.take() {
                Fleet::signal(&server, Signal::SIGKILL);
                let _ = server.wait();
            }
            std::thread::sleep(Duration::from_millis(500));
            fleet.start_server();
        }
    }
}

/// Process `process`'s database traffic, through its proxy: delayed
/// (300 ms a chunk either way, for 2 s), its answers lost (each request
/// lands, its connection closes; 1.5 s), partitioned off (nothing
/// forwarded, sockets open; a worker for longer than its lease), its
/// connections reset, or redirected to a hot standby (1.5 s).
fn proxy_fault(fleet: &mut Fleet, fault: &str, process: usize) {
    let Some(proxy) = fleet.proxies.get(process) else {
        return;
    };
    match fault {
        "delay" => {
            proxy.delay(Duration::from_millis(300));
            std::thread::sleep(Duration::from_secs(2));
            proxy.delay(Duration::ZERO);
        }
        "lose-answers" => {
            proxy.lose_answers(true);
            std::thread::sleep(Duration::from_millis(1500));
            proxy.lose_answers(false);
        }
        "partition" => {
            let ms = if process == SERVER {
                1500
            } else {
                LEASE_MS + 1000
            };
            proxy.blackhole(true);
            std::thread::sleep(Duration::from_millis(ms));
            proxy.blackhole(false);
            // What was held back mid-message cannot be trusted to resume.
            proxy.reset();
        }
        "reset" => proxy.reset(),
        _ => {
            let Some(spare) = &fleet.spare else { return };
            let standby = std::net::SocketAddr::from(([127, 0, 0, 1], spare.port()));
            proxy.redirect(standby);
            std::thread::sleep(Duration::from_millis(1500));
            proxy.redirect(fleet.primary_addr());
        }
    }
}

/// PostgreSQL restarted (fast or immediate), paused (every server process
/// SIGSTOPped for longer than a lease), made read-only for 1.5 s, its WAL
/// disk full for 1.5 s (the server panics; brought back if it gave up),
/// or failed over to the standby; SQLite's disk full for 1.5 s.
fn database_fault(fleet: &mut Fleet, fault: &str) {
    match fault {
        "read-only" => {
            fleet.sql("ALTER SYSTEM SET default_transaction_read_only = on");
            fleet.sql("SELECT pg_reload_conf()");
            std::thread::sleep(Duration::from_millis(1500));
            fleet.sql("ALTER SYSTEM RESET default_transaction_read_only");
            fleet.sql("SELECT pg_reload_conf()");
        }
        "pause-postgres" => {
            fleet.cluster().pause().expect("pause PostgreSQL");
            std::thread::sleep(Duration::from_millis(LEASE_MS + 1000));
            fleet.cluster().resume().expect("continue PostgreSQL");
        }
        "disk-full" => {
            let Some(disk) = &fleet.disk else { return };
            disk.fill();
            std::thread::sleep(Duration::from_millis(1500));
            disk.free();
            if let Some(cluster) = &mut fleet.cluster {
                cluster.revive().expect("PostgreSQL back after a full disk");
            }
        }
        "postgres-fast-restart" => {
            fleet.cluster().restart_fast().expect("a fast restart");
        }
        "failover" => fleet.fail_over(),
        _ => {
            fleet
                .cluster()
                .restart_immediate()
                .expect("an immediate restart");
        }
    }
}
