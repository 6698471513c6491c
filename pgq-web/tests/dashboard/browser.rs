//! The browser harness: a chromedriver process on a free port, a headless Chromium session with
//! a profile of its own, and screenshots saved under `target/screenshots/`.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;
use tokio::process::{Child, Command};

use crate::support::LIMIT;

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const INSTALL: &str = "install the Debian packages `chromium` and `chromium-driver` \
                       (`bash scripts/test` installs them when missing)";

/// A headless Chromium driven through WebDriver; the driver and the profile go with it.
pub(crate) struct Browser {
    pub(crate) client: Client,
    driver: Child,
    profile: PathBuf,
}

impl Browser {
    /// Starts chromedriver and opens a session. Fails, saying what to install, when Chromium or
    /// chromedriver is missing.
    pub(crate) async fn start() -> Self {
        for program in [CHROMIUM, CHROMEDRIVER] {
            assert!(
                Path::new(program).exists(),
                "{program} is missing: {INSTALL}"
            );
        }
        let port = free_port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            // A group of its own, so that the browsers it starts go with it.
            .process_group(0)
            .spawn()
            .unwrap_or_else(|err| panic!("cannot start {CHROMEDRIVER} ({err}): {INSTALL}"));
        let profile = std::env::temp_dir().join(format!(
            "pgq-web-chromium-{}-{}",
            std::process::id(),
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        let capabilities = json!({
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    "--disable-dev-shm-usage", "--window-size=1366,900",
                    format!("--user-data-dir={}", profile.display()),
                ],
            }
        });
        let capabilities = match capabilities {
            serde_json::Value::Object(map) => map,
            _ => unreachable!(),
        };
        let url = format!("http://127.0.0.1:{port}");
        let deadline = tokio::time::Instant::now() + LIMIT;
        let client = loop {
            let connector = hyper_util::client::legacy::connect::HttpConnector::new();
            let attempt = ClientBuilder::new(connector)
                .capabilities(capabilities.clone())
                .connect(&url)
                .await;
            match attempt {
                Ok(client) => break client,
                Err(err) if tokio::time::Instant::now() > deadline => {
                    panic!("no WebDriver session from {CHROMEDRIVER}: {err}; {INSTALL}")
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        };
        Self {
            client,
            driver,
            profile,
        }
    }

    /// Goes to `url`.
    pub(crate) async fn goto(&self, url: &str) {
        self.client.goto(url).await.unwrap();
    }

    /// The first element matching `css`, waiting for it to appear.
    pub(crate) async fn find(&self, css: &str) -> Element {
        self.client
            .wait()
            .at_most(LIMIT)
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|err| panic!("no element {css:?}: {err}"))
    }

    /// Every element matching `css` now.
    pub(crate) async fn all(&self, css: &str) -> Vec<Element> {
        self.client.find_all(Locator::Css(css)).await.unwrap()
    }

    /// The text of the first element matching `css`.
    pub(crate) async fn text(&self, css: &str) -> String {
        self.find(css).await.text().await.unwrap()
    }

    /// Clicks the first element matching `css`.
    pub(crate) async fn click(&self, css: &str) {
        self.find(css).await.click().await.unwrap();
    }

    /// Waits until the first element matching `css` has text containing `wanted`.
    pub(crate) async fn wait_for_text(&self, css: &str, wanted: &str) {
        let deadline = tokio::time::Instant::now() + LIMIT;
        loop {
            let found = match self.client.find(Locator::Css(css)).await {
                Ok(element) => element.text().await.unwrap_or_default(),
                Err(_) => String::new(),
            };
            if found.contains(wanted) {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{css:?} never showed {wanted:?}; it shows {found:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The whole page's visible text.
    pub(crate) async fn page_text(&self) -> String {
        self.text("body").await
    }

    /// Runs `script` in the page and returns what it returns.
    pub(crate) async fn run(&self, script: &str) -> serde_json::Value {
        self.client.execute(script, vec![]).await.unwrap()
    }

    /// Runs an async `script` (its last argument is the callback) and returns what it passes.
    pub(crate) async fn run_async(&self, script: &str) -> serde_json::Value {
        self.client.execute_async(script, vec![]).await.unwrap()
    }

    /// Saves the page as `target/screenshots/<name>.png` and returns the path.
    pub(crate) async fn screenshot(&self, name: &str) -> PathBuf {
        let png = self.client.screenshot().await.unwrap();
        let dir = screenshots_dir();
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).unwrap();
        path
    }

    /// Ends the session and the browser.
    pub(crate) async fn close(self) {
        let _ = self.client.clone().close().await;
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // A test that failed before `close` leaves no browser behind.
        if let Some(pid) = self.driver.id() {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", "--", &format!("-{pid}")])
                .stderr(Stdio::null())
                .status();
        }
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

/// `target/screenshots/` of this workspace (or of `CARGO_TARGET_DIR`).
fn screenshots_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    target.join("screenshots")
}

/// A port nobody listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
