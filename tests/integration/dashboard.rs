//! The dashboard in a real browser (Debian's Chromium, driven through chromedriver by
//! fantoccini) over a whole fleet as `fleetform up` runs it: the fleet page shows the example
//! fleet's spokes, a commit shows on the Sync page, and a spoke whose agent stops turns Unknown
//! on an open page without a reload; a rollout shows on the Rollout page. Screenshots of each page go to
//! `target/test-artifacts/dashboard/`. Without chromedriver the tests say so and pass, except
//! when `CI=true`, where they fail (`scripts/test` installs it).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use fleetform::dashboard::{DashboardConfig, RunningDashboard};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio_util::sync::CancellationToken;

use crate::support::fleet::{Fleet, Repo, rolling_hub, spoke};
use crate::support::http_response;

const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// How long a page may take to show what the fleet does (a lease expiring takes 5 × 1 s).
const DEADLINE: Duration = Duration::from_secs(60);

/// Chromium under chromedriver, with a profile of its own.
struct Browser {
    client: Client,
    driver: tokio::process::Child,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// A headless Chromium, or `None` (with a notice) when chromedriver is absent outside CI.
    async fn start() -> Option<Browser> {
        if !std::path::Path::new(CHROMEDRIVER).exists() {
            if std::env::var("CI").as_deref() == Ok("true") {
                panic!("{CHROMEDRIVER} is required when CI=true (scripts/test installs it)");
            }
            eprintln!(
                "skipped: {CHROMEDRIVER} is absent (apt-get install chromium chromium-driver)"
            );
            return None;
        }
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let mut driver = tokio::process::Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start chromedriver");
        // chromedriver says when it listens.
        let mut lines = BufReader::new(driver.stdout.take().unwrap()).lines();
        tokio::time::timeout(DEADLINE, async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if line.contains("started successfully") {
                    return;
                }
            }
            panic!("chromedriver ended before it listened");
        })
        .await
        .expect("chromedriver listens");
        let profile = tempfile::tempdir().unwrap();
        let capabilities = json!({
            "goog:chromeOptions": {
                "binary": "/usr/bin/chromium",
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    "--window-size=1280,900",
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            },
        });
        let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(capabilities.as_object().unwrap().clone())
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .expect("a browser session");
        Some(Browser {
            client,
            driver,
            _profile: profile,
        })
    }

    /// Waits until the page has an element at `xpath`; fails after [`DEADLINE`], saving what the
    /// page showed as `failed.png` and `failed.html`.
    async fn wait_for(&self, xpath: &str) -> fantoccini::elements::Element {
        let found = self
            .client
            .wait()
            .at_most(DEADLINE)
            .every(Duration::from_millis(100))
            .for_element(Locator::XPath(xpath))
            .await;
        match found {
            Ok(element) => element,
            Err(err) => {
                self.screenshot("failed").await;
                let html = self.client.source().await.unwrap_or_default();
                std::fs::write(artifacts().join("failed.html"), html).unwrap();
                panic!("no {xpath} within {DEADLINE:?}: {err}")
            }
        }
    }

    /// Waits until the page's live updates are connected.
    async fn wait_live(&self) {
        self.wait_for("//body[@data-live='connected']").await;
    }

    /// Saves a screenshot of the page as `target/test-artifacts/dashboard/NAME.png`.
    async fn screenshot(&self, name: &str) {
        let png = self.client.screenshot().await.expect("a screenshot");
        std::fs::write(artifacts().join(format!("{name}.png")), png).unwrap();
    }

    async fn close(mut self) {
        let _ = self.client.close().await;
        let _ = self.driver.kill().await;
    }
}

/// `target/test-artifacts/dashboard/`, made if missing.
fn artifacts() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/test-artifacts/dashboard");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The dashboard of `fleet`'s hubs, as `up` serves it, on a free port.
async fn dashboard(fleet: &Fleet, stop: &CancellationToken) -> RunningDashboard {
    let hubs = fleet
        .running()
        .hubs
        .iter()
        .map(|hub| (hub.name.clone(), hub.client.clone()))
        .collect();
    let config = DashboardConfig {
        addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        hubs,
        token_secret: None,
        any_port_if_taken: false,
    };
    fleetform::dashboard::start(config, stop.child_token())
        .await
        .expect("the dashboard starts")
}

/// The example fleet's documents, as files of a fleet repo.
fn example_files() -> Vec<(String, String)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/fleet-repo");
    ["hubs", "spokes", "addons"]
        .into_iter()
        .flat_map(|dir| std::fs::read_dir(root.join(dir)).unwrap())
        .map(|entry| {
            let path = entry.unwrap().path();
            let relative = path.strip_prefix(&root).unwrap().display().to_string();
            (relative, std::fs::read_to_string(&path).unwrap())
        })
        .collect()
}

/// The rollout of the tests' hub: one spoke at a time, offline ones skipped.
const ONE_AT_A_TIME: &str = "    strategy: Progressive
    maxConcurrency: 1
    minSuccessSeconds: 1
    offline: Skip
";

fn row(spoke: &str) -> String {
    format!("//tr[@id='row:hub/{spoke}']")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleet_page_shows_the_example_fleet_and_a_commit_shows_on_the_sync_page() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let repo = Repo::new();
    let files = example_files();
    let documents: Vec<(&str, Option<&str>)> = files
        .iter()
        .map(|(path, text)| (path.as_str(), Some(text.as_str())))
        .collect();
    repo.commit("the example fleet", &documents);
    let fleet = Fleet::up(repo).await;
    let stop = CancellationToken::new();
    let dashboard = dashboard(&fleet, &stop).await;
    let url = dashboard.url();

    browser.client.goto(&url).await.unwrap();
    for name in ["dev", "staging", "prod", "local-cluster"] {
        browser.wait_for(&row(name)).await;
    }
    fleet.synced().await;
    fleet.wait_running("dev").await;
    browser
        .wait_for(&format!("{}/td[4][contains(., 'True')]", row("dev")))
        .await;
    browser.screenshot("fleet").await;

    // Filtering works without JavaScript's help: a form GET.
    browser
        .client
        .goto(&format!("{url}?label=env%3Dprod"))
        .await
        .unwrap();
    browser.wait_for(&row("prod")).await;
    assert!(
        browser
            .client
            .find(Locator::XPath(&row("dev")))
            .await
            .is_err(),
        "dev is not env=prod"
    );

    browser
        .client
        .goto(&format!("{url}hubs/hub/spokes/dev"))
        .await
        .unwrap();
    browser.wait_for("//h1[contains(., 'Spoke dev')]").await;
    browser
        .wait_for("//h2[contains(., 'Availability, last 24 hours')]")
        .await;
    browser.screenshot("spoke").await;

    browser.client.goto(&format!("{url}sync")).await.unwrap();
    browser.wait_live().await;
    let subject = "dashboard: dev serves the eu-central region";
    let (path, text) = files
        .iter()
        .find(|(path, _)| path.ends_with("edge.yaml"))
        .expect("the example's spokes");
    let relabelled = text.replacen("region: eu-west", "region: eu-central", 1);
    fleet
        .repo
        .commit(subject, &[(path.as_str(), Some(&relabelled))]);
    let head = fleet.head();
    // The page shows the new commit as it is applied, without a reload.
    browser.wait_for(&format!("//code[@title='{head}']")).await;
    browser
        .wait_for(&format!("//td[contains(., '{subject}')]"))
        .await;
    browser.screenshot("sync").await;

    browser.close().await;
    stop.cancel();
    dashboard.stopped().await;
    fleet.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_an_agent_turns_its_row_unknown_on_an_open_page_without_a_reload() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let repo = Repo::new();
    let hub = rolling_hub(None, ONE_AT_A_TIME);
    repo.commit(
        "a hub and two spokes",
        &[
            ("hubs/hub.yaml", Some(&hub)),
            ("spokes/alpha.yaml", Some(&spoke("alpha", ""))),
            ("spokes/beta.yaml", Some(&spoke("beta", ""))),
        ],
    );
    let fleet = Fleet::up(repo).await;
    let stop = CancellationToken::new();
    let dashboard = dashboard(&fleet, &stop).await;
    browser.client.goto(&dashboard.url()).await.unwrap();
    let available =
        |spoke: &str, status: &str| format!("{}/td[4][contains(., '{status}')]", row(spoke));
    browser.wait_for(&available("beta", "True")).await;
    browser.wait_live().await;
    // A mark of this page: a reload would lose it.
    browser
        .client
        .execute("window.fleetformMark = 'this page'; return true;", vec![])
        .await
        .unwrap();

    assert!(fleet.running().stop_spoke("beta").await);
    browser.wait_for(&available("beta", "Unknown")).await;
    browser
        .wait_for(&format!("{}/td[3][contains(., 'OFFLINE')]", row("beta")))
        .await;
    assert!(
        browser
            .client
            .find(Locator::XPath(&available("alpha", "True")))
            .await
            .is_ok(),
        "alpha stays Available"
    );
    let mark = browser
        .client
        .execute("return window.fleetformMark || null;", vec![])
        .await
        .unwrap();
    assert_eq!(mark, json!("this page"), "the page was not reloaded");
    browser.screenshot("fleet-unknown").await;

    // A new agent rolls out to the spoke that is there.
    browser
        .client
        .goto(&format!("{}hubs/hub/rollout", dashboard.url()))
        .await
        .unwrap();
    browser.wait_live().await;
    let bumped = rolling_hub(Some("9.9.9"), ONE_AT_A_TIME);
    fleet
        .repo
        .commit("agent 9.9.9", &[("hubs/hub.yaml", Some(&bumped))]);
    browser
        .wait_for("//tr[th[contains(., 'alpha')]]/td[1][contains(., 'Succeeded')]")
        .await;
    browser.wait_for("//dd/code[contains(., '9.9.9/')]").await;
    browser.screenshot("rollout").await;

    browser.close().await;
    stop.cancel();
    dashboard.stopped().await;
    fleet.shutdown().await;
}

/// A viewer's live-update stream, read until what it waits for shows.
struct LiveStream(tokio::net::TcpStream);

impl LiveStream {
    async fn open(addr: SocketAddr, token: &str) -> LiveStream {
        use tokio::io::AsyncWriteExt;
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request = format!(
            "GET /events HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut live = LiveStream(stream);
        live.until("event: hello").await;
        live
    }

    /// Reads until `needle` shows; fails after [`DEADLINE`].
    async fn until(&mut self, needle: &str) {
        use tokio::io::AsyncReadExt;
        let mut seen = String::new();
        let mut buffer = [0u8; 16384];
        tokio::time::timeout(DEADLINE, async {
            while !seen.contains(needle) {
                let read = self.0.read(&mut buffer).await.unwrap();
                assert!(read > 0, "the stream ended before {needle}: {seen}");
                seen.push_str(&String::from_utf8_lossy(&buffer[..read]));
            }
        })
        .await
        .unwrap_or_else(|_| panic!("no {needle} within {DEADLINE:?}"));
    }
}

#[tokio::test]
async fn syncs_dashboard_wants_its_secrets_token_and_reads_as_the_hub_service_account() {
    use fleetform::api::fleet::SYSTEM_NAMESPACE;
    use fleetform::events::{EventType, Reporter};
    use k8s_openapi::api::core::v1::Secret;
    use kube::Api;
    use kube::api::PostParams;

    let hub = crate::support::Cluster::start().await;
    let identity = hub.hub_identity().await;
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "dashboard", "namespace": SYSTEM_NAMESPACE},
        "stringData": {"token": "s3cret\n"},
    }))
    .unwrap();
    Api::<Secret>::namespaced(hub.client.clone(), SYSTEM_NAMESPACE)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let stop = CancellationToken::new();
    let dashboard = fleetform::dashboard::start(
        DashboardConfig {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            hubs: vec![("hub".to_string(), identity.clone())],
            token_secret: Some("fleetform-system/dashboard".parse().unwrap()),
            any_port_if_taken: false,
        },
        stop.child_token(),
    )
    .await
    .expect("the dashboard starts, reading its token as the hub ServiceAccount");
    let addr = dashboard.addr();

    let (code, page) = http_response(addr, "/", None).await;
    assert_eq!(code, 401, "{page}");
    assert!(page.contains("WWW-Authenticate: Bearer") || page.contains("www-authenticate: Bearer"));
    assert_eq!(http_response(addr, "/", Some("guess")).await.0, 401);
    assert_eq!(http_response(addr, "/events", None).await.0, 401);

    // What the hub holds reaches a signed-in viewer through the watches, as it changes.
    let mut live = LiveStream::open(addr, "s3cret").await;
    let spoke: fleetform::api::Spoke = serde_json::from_value(json!({
        "apiVersion": "fleetform.io/v1alpha1", "kind": "Spoke",
        "metadata": {"name": "edge", "namespace": SYSTEM_NAMESPACE},
        "spec": {"hubRef": "hub", "kubeconfig": {"embedded": {}}},
    }))
    .unwrap();
    let spoke = Api::<fleetform::api::Spoke>::namespaced(hub.client.clone(), SYSTEM_NAMESPACE)
        .create(&PostParams::default(), &spoke)
        .await
        .unwrap();
    live.until("row:hub/edge").await;
    Reporter::new(hub.client.clone(), "fleetform-test", "test")
        .publish(
            &fleetform::events::reference(&spoke),
            EventType::Warning,
            "SpokeUnreachable",
            "Join",
            "cannot reach <edge>".to_string(),
        )
        .await;
    live.until("spoke:hub/edge").await;
    let (code, page) = http_response(addr, "/hubs/hub/spokes/edge", Some("s3cret")).await;
    assert_eq!(code, 200, "{page}");
    assert!(page.contains("cannot reach &lt;edge&gt;"), "{page}");
    assert!(!page.contains("s3cret"), "the token is shown nowhere");

    // The token rotated in its Secret: the new one is admitted, the old one no more.
    let rotated = json!({"data": {"token": "bjN3"}}); // "n3w"
    Api::<Secret>::namespaced(hub.client.clone(), SYSTEM_NAMESPACE)
        .patch(
            "dashboard",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&rotated),
        )
        .await
        .unwrap();
    tokio::time::timeout(crate::support::PATIENCE, async {
        while http_response(addr, "/", Some("n3w")).await.0 != 200 {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the rotated token admitted");
    assert_eq!(http_response(addr, "/", Some("s3cret")).await.0, 401);

    stop.cancel();
    dashboard.stopped().await;
}
