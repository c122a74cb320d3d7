//! The processes under test (`Fleet`: three workers and a server on a
//! throwaway cluster) and the faults dealt to them (`Nemesis`), each
//! written down as a [`FaultWindow`] on the history's clock.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use cairn_history::FaultWindow;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::history::{now_ns, Rng};
use crate::support::{wait_until, Case};

/// The worker whose wall clock runs an hour ahead on PostgreSQL (Debian's
/// `faketime`, its monotonic clock left alone): leases and every time
/// Cairn stores are the database server's, so nothing may change.
const SKEWED: usize = 2;

/// The workers' lease: a paused worker is paused for longer.
const LEASE_MS: u64 = 3000;
const WORKERS: usize = 3;

/// Three `cairn worker`s and a `cairn serve` (API only) on a throwaway
/// PostgreSQL cluster or a SQLite file.
pub struct Fleet {
    /// `None` on SQLite: the database faults are PostgreSQL's.
    cluster: Option<cairn_testkit::PgCluster>,
    /// A standby the URL names after the primary, until a failover
    /// promotes it.
    standby: Option<Standby>,
    url: String,
    dir: PathBuf,
    crews: PathBuf,
    port: u16,
    workers: Vec<Child>,
    server: Option<Child>,
    /// Per worker, how many times it was started (names its log).
    starts: Vec<usize>,
}

impl Fleet {
    pub fn start(case: &Case, cluster: Option<cairn_testkit::PgCluster>, crew: &Path) -> Fleet {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let mut fleet = Fleet {
            url: case.url().to_owned(),
            cluster,
            standby: None,
            dir: case.path("."),
            crews: crew.parent().expect("the crew's directory").to_owned(),
            port,
            workers: vec![],
            server: None,
            starts: vec![0; WORKERS],
        };
        for i in 0..WORKERS {
            let child = fleet.spawn_worker(i);
            fleet.workers.push(child);
        }
        fleet.start_server();
        fleet
    }

    pub fn server_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn command(&self) -> Command {
        self.in_case(Command::new(crate::support::CAIRN))
    }

    /// `cmd` in the case's directory with no inherited Cairn settings.
    fn in_case(&self, mut cmd: Command) -> Command {
        cmd.current_dir(&self.dir)
            .env_remove("CAIRN_DATABASE_URL")
            .env_remove("CAIRN_FAILPOINTS")
            .env("CAIRN_LOG", "warn")
            .stdin(Stdio::null());
        cmd
    }

    /// `cairn` an hour ahead with Debian's libfaketime preloaded (its
    /// `faketime` command would fork the program, and the pid the test
    /// kills would be the wrapper's), if this machine has it (CI installs
    /// it); otherwise on the true clock, and the skip is logged.
    fn skewed(&self) -> Command {
        let lib = std::fs::read_dir("/usr/lib").ok().and_then(|dirs| {
            dirs.filter_map(|d| d.ok())
                .map(|d| d.path().join("faketime/libfaketimeMT.so.1"))
                .find(|lib| lib.is_file())
        });
        let mut cmd = self.command();
        match lib {
            Some(lib) => {
                cmd.env("LD_PRELOAD", lib)
                    .env("FAKETIME", "+1h")
                    .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
            }
            None => cairn_testkit::skip(
                "campaign (clock skew)",
                "libfaketime is not installed (apt-get install faketime): every worker runs on the true clock",
            ),
        }
        cmd
    }

    fn log(&self, name: &str) -> Stdio {
        Stdio::from(std::fs::File::create(self.dir.join(name)).expect("a log file"))
    }

    fn spawn_worker(&mut self, i: usize) -> Child {
        self.starts[i] += 1;
        let name = format!("worker-{i}-{}", self.starts[i]);
        let lease = LEASE_MS.to_string();
        // On SQLite the database's clock is each process's own (`now` in
        // SQLite is the calling process's clock): a process an hour ahead
        // sees every lease expired, so processes sharing a file must share
        // a clock, as on one machine they do. Skewed on PostgreSQL only.
        let mut cmd = match (i, &self.cluster) {
            (SKEWED, Some(_)) => self.skewed(),
            _ => self.command(),
        };
        cmd.args(["worker", "--concurrency", "4", "--lease-ms", &lease])
            .args([
                "--heartbeat-ms",
                "500",
                "--poll-ms",
                "50",
                "--db",
                &self.url,
            ])
            .env("CAMPAIGN_WORKER", format!("w{i}"))
            .stdout(self.log(&format!("{name}.out")))
            .stderr(self.log(&format!("{name}.err")));
        cmd.spawn().expect("spawn cairn worker")
    }

    fn start_server(&mut self) {
        let listen = format!("127.0.0.1:{}", self.port);
        let crews = self.crews.to_str().expect("a UTF-8 path").to_owned();
        let mut cmd = self.command();
        cmd.args(["serve", "--listen", &listen, "--concurrency", "0"])
            .args(["--crews", &crews, "--db", &self.url])
            .stdout(self.log("serve.out"))
            .stderr(self.log("serve.err"));
        self.server = Some(cmd.spawn().expect("spawn cairn serve"));
        wait_until("the server to listen", Duration::from_secs(30), || {
            std::net::TcpStream::connect(&listen).is_ok()
        });
    }

    fn signal(child: &Child, sig: Signal) {
        let _ = kill(Pid::from_raw(child.id() as i32), sig);
    }

    fn sql(&self, sql: &str) {
        if let Some(cluster) = &self.cluster {
            cluster.sql(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
    }

    fn cluster(&mut self) -> &mut cairn_testkit::PgCluster {
        self.cluster
            .as_mut()
            .expect("a database fault on PostgreSQL only")
    }

    /// The faults this fleet can be dealt: with a standby, a failover
    /// among the processes' faults; after it, every fault again.
    pub fn faults(&self) -> &'static [&'static str] {
        match (&self.cluster, &self.standby) {
            (Some(_), Some(_)) => &FAILOVER_FAULTS,
            (Some(_), None) => &FAULTS,
            (None, _) => &FAULTS[..PROCESS_FAULTS],
        }
    }

    /// Names `standby` as the one a failover promotes.
    pub fn with_standby(mut self, standby: Standby) -> Fleet {
        self.standby = Some(standby);
        self
    }

    /// The primary stopped immediately and the standby promoted; an
    /// asynchronous one cut off first (its link blackholed for a while,
    /// the primary acknowledging commits meanwhile), so the promotion
    /// loses what the primary acknowledged since.
    fn fail_over(&mut self) {
        let Some(standby) = self.standby.take() else {
            return;
        };
        if let Some(link) = &standby.link {
            link.blackhole(true);
            std::thread::sleep(Duration::from_secs(2));
        }
        self.cluster().stop_immediate().expect("stop the primary");
        let mut promoted = standby.cluster;
        promoted.promote().expect("promote the standby");
        self.cluster = Some(promoted);
    }

    /// Every process running and not paused, the database writable.
    pub fn heal(&mut self) {
        for i in 0..WORKERS {
            Fleet::signal(&self.workers[i], Signal::SIGCONT);
            if let Ok(Some(_)) = self.workers[i].try_wait() {
                self.workers[i] = self.spawn_worker(i);
            }
        }
        self.sql("ALTER SYSTEM RESET default_transaction_read_only");
        self.sql("SELECT pg_reload_conf()");
    }

    /// Stops every process it started (SIGTERM, then waits), by pid.
    pub fn stop(mut self) {
        self.stop_all();
    }

    fn stop_all(&mut self) {
        let children = self.workers.iter_mut().chain(self.server.as_mut());
        for child in children {
            Fleet::signal(child, Signal::SIGCONT);
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        self.stop_all();
    }
}

/// The faults, dealt in turn so that a short campaign has each at least
/// once; which worker each one hits is the seed's choice.
pub struct Nemesis {
    rng: Rng,
    next: usize,
    windows: Vec<FaultWindow>,
    counts: BTreeMap<&'static str, usize>,
}

const FAULTS: [&str; 6] = [
    "kill-worker",
    "pause-worker",
    "kill-server",
    "postgres-fast-restart",
    "read-only",
    "postgres-immediate-restart",
];

/// The first faults of [`FAULTS`], which hit processes, not the database.
const PROCESS_FAULTS: usize = 3;

/// With a standby: processes' faults around one failover.
const FAILOVER_FAULTS: [&str; 4] = ["kill-worker", "failover", "pause-worker", "kill-server"];

/// A standby of the fleet's cluster, and the proxy it streams through when
/// the test means to cut it off.
pub struct Standby {
    pub cluster: cairn_testkit::PgCluster,
    pub link: Option<cairn_testkit::CutProxy>,
}

/// How long after a fault healed its window still runs: the operations
/// that complete meanwhile still show the fault's aftermath.
const AFTERMATH: Duration = Duration::from_secs(2);

impl Nemesis {
    pub fn new(seed: u64) -> Nemesis {
        Nemesis {
            rng: Rng::new(seed ^ 0x5eed),
            next: 0,
            windows: vec![],
            counts: BTreeMap::new(),
        }
    }

    /// Deals the next fault and waits until it healed.
    pub fn strike(&mut self, fleet: &mut Fleet) {
        let faults = fleet.faults();
        let fault = faults[self.next % faults.len()];
        self.next += 1;
        let start_ns = now_ns();
        let worker = self.rng.below(WORKERS as u64) as usize;
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
            "kill-server" => {
                if let Some(mut server) = fleet.server.take() {
                    Fleet::signal(&server, Signal::SIGKILL);
                    let _ = server.wait();
                }
                std::thread::sleep(Duration::from_millis(500));
                fleet.start_server();
            }
            "read-only" => {
                fleet.sql("ALTER SYSTEM SET default_transaction_read_only = on");
                fleet.sql("SELECT pg_reload_conf()");
                std::thread::sleep(Duration::from_secs(2));
                fleet.sql("ALTER SYSTEM RESET default_transaction_read_only");
                fleet.sql("SELECT pg_reload_conf()");
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
        let end_ns = now_ns() + AFTERMATH.as_nanos() as u64;
        self.windows.push(FaultWindow {
            nemesis: fault.to_owned(),
            start_ns,
            end_ns,
        });
        *self.counts.entry(fault).or_default() += 1;
        std::thread::sleep(AFTERMATH);
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
