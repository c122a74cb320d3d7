//! The processes under test: three `cairn worker`s and a `cairn serve` on
//! a throwaway PostgreSQL cluster or a SQLite file, and what the faults
//! need around them: a proxy between each process and PostgreSQL, a hot
//! standby a proxy can be redirected to, a small disk that fills, a
//! standby a failover promotes. [`Fleet::heal`] undoes every fault.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use cairn_testkit::{CutProxy, PgCluster, SmallDisk};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::support::{wait_until, Case};

/// The worker whose wall clock runs an hour ahead on PostgreSQL (Debian's
/// libfaketime, its monotonic clock left alone): leases and every time
/// Cairn stores are the database server's, so nothing may change.
const SKEWED: usize = 2;

/// The workers' lease: a paused or partitioned worker is out for longer.
pub const LEASE_MS: u64 = 3000;
pub const WORKERS: usize = 3;
/// The server's number among the processes (the workers are 0..WORKERS).
pub const SERVER: usize = WORKERS;

/// What a fleet runs on besides its processes.
#[derive(Default)]
pub struct Setup {
    /// `None` on SQLite: the database faults are PostgreSQL's.
    pub cluster: Option<PgCluster>,
    /// A standby a failover promotes.
    pub standby: Option<Standby>,
    /// A proxy between each process and the cluster, and a hot standby of
    /// the cluster to redirect them to (the proxies' faults).
    pub proxied: bool,
    /// The disk that fills: the SQLite file's, or the cluster's WAL.
    pub disk: Option<SmallDisk>,
}

/// A standby of the fleet's cluster, and the proxy it streams through when
/// the test means to cut it off.
pub struct Standby {
    pub cluster: PgCluster,
    pub link: Option<CutProxy>,
}

pub struct Fleet {
    // Declared (so dropped) before the clusters and the disk they use.
    pub workers: Vec<Child>,
    pub server: Option<Child>,
    pub proxies: Vec<CutProxy>,
    pub cluster: Option<PgCluster>,
    pub standby: Option<Standby>,
    /// A hot standby the proxies redirect to (`redirect`).
    pub spare: Option<PgCluster>,
    pub disk: Option<SmallDisk>,
    url: String,
    dir: PathBuf,
    crews: PathBuf,
    port: u16,
    /// Per worker, how many times it was started (names its log).
    starts: Vec<usize>,
}

impl Fleet {
    pub fn start(case: &Case, setup: Setup, crew: &Path) -> Fleet {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let mut fleet = Fleet {
            workers: vec![],
            server: None,
            proxies: vec![],
            spare: None,
            url: case.url().to_owned(),
            cluster: setup.cluster,
            standby: setup.standby,
            disk: setup.disk,
            dir: case.path("."),
            crews: crew.parent().expect("the crew's directory").to_owned(),
            port,
            starts: vec![0; WORKERS],
        };
        if setup.proxied {
            fleet.proxy_every_process();
        }
        for i in 0..WORKERS {
            let child = fleet.spawn_worker(i);
            fleet.workers.push(child);
        }
        fleet.start_server();
        fleet
    }

    /// A proxy per process in front of the cluster, and a hot standby.
    fn proxy_every_process(&mut self) {
        let cluster = self
            .cluster
            .as_ref()
            .expect("proxies in front of a cluster");
        let primary = self.primary_addr();
        self.proxies = (0..=WORKERS)
            .map(|_| CutProxy::start(primary).expect("a proxy"))
            .collect();
        let spare = cluster
            .standby()
            .unwrap_or_else(|e| panic!("a standby: {e}"));
        self.spare = Some(spare);
    }

    pub fn primary_addr(&self) -> std::net::SocketAddr {
        let port = self.cluster.as_ref().map_or(0, PgCluster::port);
        std::net::SocketAddr::from(([127, 0, 0, 1], port))
    }

    /// The database URL process `i` uses: through its proxy, if any.
    fn db_url(&self, i: usize) -> String {
        match self.proxies.get(i) {
            Some(proxy) => proxy.url(&self.url),
            None => self.url.clone(),
        }
    }

    pub fn server_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `cairn` in the case's directory with no inherited Cairn settings.
    fn command(&self) -> Command {
        let mut cmd = Command::new(crate::support::CAIRN);
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
        let mut cmd = self.command();
        match cairn_testkit::skewed_clock("+1h") {
            Some(env) => {
                cmd.envs(env);
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

    pub fn spawn_worker(&mut self, i: usize) -> Child {
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
            .args(["--heartbeat-ms", "500", "--poll-ms", "50"])
            .args(["--db", &self.db_url(i)])
            .env("CAMPAIGN_WORKER", format!("w{i}"))
            .stdout(self.log(&format!("{name}.out")))
            .stderr(self.log(&format!("{name}.err")));
        cmd.spawn().expect("spawn cairn worker")
    }

    pub fn start_server(&mut self) {
        let listen = format!("127.0.0.1:{}", self.port);
        let crews = self.crews.to_str().expect("a UTF-8 path").to_owned();
        let mut cmd = self.command();
        cmd.args(["serve", "--listen", &listen, "--concurrency", "0"])
            .args(["--crews", &crews, "--db", &self.db_url(SERVER)])
            .stdout(self.log("serve.out"))
            .stderr(self.log("serve.err"));
        self.server = Some(cmd.spawn().expect("spawn cairn serve"));
        wait_until("the server to listen", Duration::from_secs(30), || {
            std::net::TcpStream::connect(&listen).is_ok()
        });
    }

    pub fn signal(child: &Child, sig: Signal) {
        let _ = kill(Pid::from_raw(child.id() as i32), sig);
    }

    pub fn sql(&self, sql: &str) {
        if let Some(cluster) = &self.cluster {
            cluster.sql(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
    }

    pub fn cluster(&mut self) -> &mut PgCluster {
        self.cluster
            .as_mut()
            .expect("a database fault on PostgreSQL only")
    }

    /// The primary stopped immediately and the standby promoted; an
    /// asynchronous one cut off first (its link blackholed for a while,
    /// the primary acknowledging commits meanwhile), so the promotion
    /// loses what the primary acknowledged since.
    pub fn fail_over(&mut self) {
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

    /// Every process running and not paused, every proxy forwarding to the
    /// primary, the disk freed, the database up and writable.
    pub fn heal(&mut self) {
        for i in 0..WORKERS {
            Fleet::signal(&self.workers[i], Signal::SIGCONT);
            if let Ok(Some(_)) = self.workers[i].try_wait() {
                self.workers[i] = self.spawn_worker(i);
            }
        }
        let primary = self.primary_addr();
        for proxy in &self.proxies {
            proxy.delay(Duration::ZERO);
            proxy.lose_answers(false);
            proxy.blackhole(false);
            proxy.redirect(primary);
        }
        if let Some(disk) = &self.disk {
            disk.free();
        }
        if let Some(cluster) = &mut self.cluster {
            let _ = cluster.resume();
            cluster.revive().unwrap_or_else(|e| panic!("revive: {e}"));
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
        if let Some(cluster) = &self.cluster {
            let _ = cluster.resume();
        }
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        self.stop_all();
    }
}
