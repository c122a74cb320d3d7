//! A headless Chromium driven over W3C WebDriver (chromedriver), for
//! end-to-end tests of the web console. The client is a few calls over
//! `reqwest` with the workspace's features: fantoccini would add 28 crates
//! (a second `http`, an ICU stack) for what is here about 20 requests.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use reqwest::Method;
use serde_json::{json, Value};

/// What the W3C protocol calls an element reference's key.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";
/// Without the networking flags Chromium's connections to the closed network pile up.
const ARGS: &[&str] = &[
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,900",
];
const POLL: Duration = Duration::from_millis(100);

/// Each message says what was being done, and what to do where there is
/// something to do.
#[derive(Debug, thiserror::Error)]
pub enum BrowserError {
    #[error("{0} (`apt-get install chromium chromium-driver`)")]
    NotInstalled(String),
    #[error("{0}: {1}")]
    Io(String, #[source] std::io::Error),
    #[error("chromedriver did not become ready: {0}")]
    DriverNotReady(String),
    #[error("{0}: cannot reach chromedriver: {1}")]
    Http(String, #[source] reqwest::Error),
    /// An error answer of the W3C protocol: `error` is its code, such as
    /// "no such element".
    #[error("{what}: {error}: {message}")]
    WebDriver {
        what: String,
        error: String,
        message: String,
    },
    #[error("{0}: unexpected answer from chromedriver: {1}")]
    Protocol(String, String),
    #[error("timed out after {waited:?} waiting for {what} on {url}; last text seen: {last:?}")]
    Timeout {
        what: String,
        waited: Duration,
        url: String,
        last: String,
    },
}

type Result<T, E = BrowserError> = std::result::Result<T, E>;

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> BrowserError {
    let what = what.into();
    move |source| BrowserError::Io(what, source)
}

/// The chromedriver process (in a process group of its own, so Chromium
/// goes with it) and the browser's profile directory.
struct Driver {
    child: Child,
    port: u16,
    profile: tempfile::TempDir,
}

impl Drop for Driver {
    fn drop(&mut self) {
        // Only the group we started, by its id (= chromedriver's pid).
        if let Ok(pgid) = i32::try_from(self.child.id()) {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pgid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = self.child.wait();
    }
}

/// One browser session. Dropping it ends the session, kills chromedriver's
/// process group and removes the profile.
pub struct Browser {
    http: reqwest::Client,
    session: String,
    driver: Driver,
}

fn locate(var: &'static str, default: &str, what: &'static str) -> Result<PathBuf> {
    let path = PathBuf::from(std::env::var_os(var).unwrap_or_else(|| default.into()));
    if path.is_file() {
        Ok(path)
    } else {
        let path = path.display();
        Err(BrowserError::NotInstalled(format!(
            "{what} not found at {path} (set {var})"
        )))
    }
}

/// Set (to anything) where the browser tests must run, as CI does: a
/// missing Chromium is then a failure, not a skip.
pub const REQUIRE: &str = "CAIRN_REQUIRE_BROWSER";

/// Whether Chromium and chromedriver are here for `test`. Where either is
/// missing, the test should return at once: this says so in one line on
/// the terminal (written past the test harness's capture, so it shows in
/// a passing run) unless [`REQUIRE`] is set, where it panics instead. One
/// missing tool so never hides the rest of the suite from a laptop.
pub fn present(test: &str) -> bool {
    // Every missing tool, the browser first.
    let missing: Vec<String> = [
        locate("CAIRN_CHROMIUM", "/usr/bin/chromium", "chromium"),
        locate(
            "CAIRN_CHROMEDRIVER",
            "/usr/bin/chromedriver",
            "chromedriver",
        ),
    ]
    .into_iter()
    .filter_map(Result::err)
    .map(|e| e.to_string())
    .collect();
    if missing.is_empty() {
        return true;
    }
    let missing = missing.join("; ");
    if std::env::var_os(REQUIRE).is_some() {
        panic!("{test}: {missing} ({REQUIRE} is set, so the browser tests must run)");
    }
    let why = format!(
        "{missing} (apt-get install chromium chromium-driver; set {REQUIRE}=1 to make this a failure)"
    );
    crate::skip(test, &why);
    false
}

impl Browser {
    /// Starts chromedriver on a free loopback port and opens a session.
    pub async fn start() -> Result<Browser> {
        let driver_bin = locate(
            "CAIRN_CHROMEDRIVER",
            "/usr/bin/chromedriver",
            "chromedriver",
        )?;
        let chromium = locate("CAIRN_CHROMIUM", "/usr/bin/chromium", "chromium")?;
        let profile = tempfile::Builder::new()
            .prefix("cairn-browser-")
            .tempdir()
            .map_err(io("create a profile directory"))?;
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(io("find a free loopback port"))?
            .port();
        let child = Command::new(&driver_bin)
            .arg(format!("--port={port}"))
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(io(format!("start {}", driver_bin.display())))?;
        let mut driver = Driver {
            child,
            port,
            profile,
        };
        let http = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(60))
            .build()
            .map_err(|e| BrowserError::Http("build a client".into(), e))?;
        let status = format!("http://127.0.0.1:{port}/status");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(exit)) = driver.child.try_wait() {
                return Err(BrowserError::DriverNotReady(format!(
                    "it exited ({exit}) on port {port}"
                )));
            }
            let answer = match http.get(&status).send().await {
                Ok(r) => r.json::<Value>().await.ok(),
                Err(_) => None,
            };
            if answer.is_some_and(|v| v["value"]["ready"] == true) {
                break;
            }
            if Instant::now() > deadline {
                return Err(BrowserError::DriverNotReady(format!(
                    "{status} not ready after 20 s"
                )));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let mut args: Vec<String> = ARGS.iter().map(|a| a.to_string()).collect();
        args.push(format!(
            "--user-data-dir={}",
            driver.profile.path().display()
        ));
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": chromium, "args": args},
        }}});
        let url = format!("http://127.0.0.1:{port}/session");
        let value = call(&http, Method::POST, &url, Some(caps), "open a session").await?;
        let Some(session) = value["sessionId"].as_str().map(str::to_owned) else {
            return Err(protocol("open a session", &value));
        };
        Ok(Browser {
            http,
            session,
            driver,
        })
    }

    /// chromedriver's pid, which is also its process group's id.
    pub fn driver_pid(&self) -> u32 {
        self.driver.child.id()
    }

    async fn cmd(&self, m: Method, path: &str, body: Option<Value>, what: &str) -> Result<Value> {
        let (port, session) = (self.driver.port, &self.session);
        let url = format!("http://127.0.0.1:{port}/session/{session}{path}");
        call(&self.http, m, &url, body, what).await
    }

    async fn post(&self, path: &str, body: Value, what: &str) -> Result<Value> {
        self.cmd(Method::POST, path, Some(body), what).await
    }

    async fn get(&self, path: &str, what: &str) -> Result<Value> {
        self.cmd(Method::GET, path, None, what).await
    }

    /// The first element matching `css`, as the path of its commands.
    async fn find(&self, css: &str, what: &str) -> Result<String> {
        let v = self.post("/element", by_css(css), what).await?;
        match v[ELEMENT].as_str() {
            Some(id) => Ok(format!("/element/{id}")),
            None => Err(protocol(what, &v)),
        }
    }

    async fn timed_out(&self, what: String, waited: Duration, last: String) -> BrowserError {
        let url = self.current_url().await.unwrap_or_default();
        BrowserError::Timeout {
            what,
            waited,
            url,
            last,
        }
    }

    /// Loads `url` and waits for the page's load event.
    pub async fn goto(&self, url: &str) -> Result<()> {
        self.post("/url", json!({"url": url}), &format!("go to {url}"))
            .await?;
        Ok(())
    }

    pub async fn current_url(&self) -> Result<String> {
        let v = self.get("/url", "read the URL").await?;
        Ok(v.as_str().unwrap_or_default().to_owned())
    }

    pub async fn reload(&self) -> Result<()> {
        self.post("/refresh", json!({}), "reload").await?;
        Ok(())
    }

    /// Clicks the element. On a live page that swapped its parts between
    /// the lookup and the click (stale), the element is found again, a
    /// few times.
    pub async fn click(&self, css: &str) -> Result<()> {
        let what = format!("click `{css}`");
        let what = what.as_str();
        self.on_fresh(css, what, |el| async move {
            self.post(&format!("{el}/click"), json!({}), what).await
        })
        .await
    }

    /// Clears the field, then types `text` into it as keystrokes; looked
    /// up again if a live page swapped it meanwhile (stale), a few times.
    pub async fn fill(&self, css: &str, text: &str) -> Result<()> {
        let what = format!("fill `{css}`");
        let what = what.as_str();
        self.on_fresh(css, what, |el| async move {
            self.post(&format!("{el}/clear"), json!({}), what).await?;
            self.post(&format!("{el}/value"), json!({"text": text}), what)
                .await
        })
        .await
    }

    /// `act` on the element at `css`, found again when it went stale.
    async fn on_fresh<F, Fut>(&self, css: &str, what: &str, act: F) -> Result<()>
    where
        F: Fn(String) -> Fut,
        Fut: std::future::Future<Output = Result<Value>>,
    {
        let mut tries = 0;
        loop {
            let el = self.find(css, what).await?;
            match act(el).await {
                Ok(_) => return Ok(()),
                Err(BrowserError::WebDriver { ref error, .. })
                    if error == "stale element reference" && tries < 5 =>
                {
                    tries += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Submits the form at `css` as a person would (validation, submit handlers).
    pub async fn submit_form(&self, css: &str) -> Result<()> {
        let what = format!("submit `{css}`");
        let el = self.find(css, &what).await?;
        let form = json!({ ELEMENT: el.trim_start_matches("/element/") });
        let body = json!({"script": "arguments[0].requestSubmit()", "args": [form]});
        self.post("/execute/sync", body, &what).await?;
        Ok(())
    }

    /// The element's rendered text (what a person sees, not hidden text).
    /// A page that replaces its parts while it is read (a live page) gets
    /// the element looked up again, a few times.
    pub async fn text(&self, css: &str) -> Result<String> {
        let what = format!("read the text of `{css}`");
        let mut tries = 0;
        loop {
            let el = self.find(css, &what).await?;
            match self.get(&format!("{el}/text"), &what).await {
                Ok(v) => return Ok(v.as_str().unwrap_or_default().to_owned()),
                Err(BrowserError::WebDriver { ref error, .. })
                    if error == "stale element reference" && tries < 5 =>
                {
                    tries += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    pub async fn exists(&self, css: &str) -> Result<bool> {
        let v = self
            .post("/elements", by_css(css), &format!("look for `{css}`"))
            .await?;
        Ok(v.as_array().is_some_and(|a| !a.is_empty()))
    }

    /// The attribute as written in the page (`None` when absent). Like
    /// [`Browser::text`], an element the page redrew between finding and
    /// reading it (stale) is found again, a few times.
    pub async fn attr(&self, css: &str, name: &str) -> Result<Option<String>> {
        let what = format!("read `{name}` of `{css}`");
        let mut tries = 0;
        loop {
            let el = self.find(css, &what).await?;
            match self.get(&format!("{el}/attribute/{name}"), &what).await {
                Ok(v) => return Ok(v.as_str().map(str::to_owned)),
                Err(BrowserError::WebDriver { ref error, .. })
                    if error == "stale element reference" && tries < 5 =>
                {
                    tries += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Runs `js` as a function body (`arguments[i]` are `args`); returns what it returns.
    pub async fn execute(&self, js: &str, args: Vec<Value>) -> Result<Value> {
        let body = json!({"script": js, "args": args});
        self.post("/execute/sync", body, "run a script").await
    }

    pub async fn wait_for(&self, css: &str, timeout: Duration) -> Result<()> {
        let start = Instant::now();
        while !self.exists(css).await? {
            if start.elapsed() > timeout {
                let what = format!("`{css}` to appear");
                return Err(self.timed_out(what, timeout, String::new()).await);
            }
            tokio::time::sleep(POLL).await;
        }
        Ok(())
    }

    /// Polls until the element's text contains `needle` (the element may
    /// appear or be replaced meanwhile); returns the whole text.
    pub async fn wait_for_text(
        &self,
        css: &str,
        needle: &str,
        timeout: Duration,
    ) -> Result<String> {
        let start = Instant::now();
        loop {
            let last = match self.text(css).await {
                Ok(t) if t.contains(needle) => return Ok(t),
                Ok(t) => t,
                Err(BrowserError::WebDriver { error, .. })
                    if error == "no such element" || error == "stale element reference" =>
                {
                    format!("({error})")
                }
                Err(e) => return Err(e),
            };
            if start.elapsed() > timeout {
                let what = format!("`{css}` to contain {needle:?}");
                return Err(self.timed_out(what, timeout, last).await);
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Resizes the window, to see a page at a phone's or a small laptop's
    /// width. The viewport is 143 px shorter here (1280x900 gives 1280x757).
    pub async fn set_size(&self, width: u32, height: u32) -> Result<()> {
        let body = json!({"width": width, "height": height});
        self.post("/window/rect", body, "resize the window").await?;
        Ok(())
    }

    /// Writes a PNG of the viewport to `path`, to look at or attach to a failure.
    pub async fn screenshot_png(&self, path: impl AsRef<Path>) -> Result<()> {
        let what = "take a screenshot";
        let v = self.get("/screenshot", what).await?;
        let png = base64::engine::general_purpose::STANDARD
            .decode(v.as_str().unwrap_or_default())
            .map_err(|e| protocol(what, &e.to_string().into()))?;
        let path = path.as_ref();
        std::fs::write(path, png).map_err(io(format!("write {}", path.display())))
    }
}

impl Drop for Browser {
    /// Ends the session (Chromium quits and lets go of its profile) with a
    /// blocking request, since drop may run outside or at the end of a runtime.
    fn drop(&mut self) {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.driver.port)) else {
            return;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
        let req = format!(
            "DELETE /session/{} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            self.session, self.driver.port
        );
        // The answer comes once Chromium has quit; chromedriver keeps the
        // connection open after it, so one read is the wait.
        if s.write_all(req.as_bytes()).is_ok() {
            let _ = s.read(&mut [0; 512]);
        }
    }
}

/// One WebDriver request; a W3C error answer becomes `BrowserError::WebDriver`.
async fn call(
    http: &reqwest::Client,
    method: Method,
    url: &str,
    body: Option<Value>,
    what: &str,
) -> Result<Value> {
    let http_err = |e| BrowserError::Http(what.into(), e);
    let mut req = http.request(method, url);
    if let Some(body) = body {
        req = req.json(&body);
    }
    let resp = req.send().await.map_err(http_err)?;
    let ok = resp.status().is_success();
    let mut answer: Value = resp.json().await.map_err(http_err)?;
    let value = answer["value"].take();
    if ok {
        return Ok(value);
    }
    let field = |k: &str| value[k].as_str().unwrap_or_default().to_owned();
    match (field("error"), field("message")) {
        (error, message) if !error.is_empty() => Err(BrowserError::WebDriver {
            what: what.into(),
            error,
            message,
        }),
        _ => Err(protocol(what, &value)),
    }
}

fn protocol(what: &str, answer: &Value) -> BrowserError {
    BrowserError::Protocol(what.into(), answer.to_string())
}

fn by_css(css: &str) -> Value {
    json!({"using": "css selector", "value": css})
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_missing_binary_says_how_to_install_it() {
        let missing = super::locate(
            "CAIRN_TEST_UNSET",
            "/nonexistent/chromedriver",
            "chromedriver",
        );
        let err = missing.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            err.contains("apt-get install chromium chromium-driver"),
            "{err}"
        );
    }
}
