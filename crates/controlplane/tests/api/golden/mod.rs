//! Golden replay: every request of `tests/k8s-golden/` (kube-apiserver v1.36's recorded answers;
//! its README says how they were made) is sent to a fresh embedded control plane, and each answer
//! is compared with kube-apiserver's as that README says. A test that passes on the embedded
//! server must mean it passes on a real one.
//!
//! `GOLDEN_REPORT=1` prints every difference of every scenario, known ones included;
//! `GOLDEN_ONLY=03,04` replays only the scenarios whose names start so (later scenarios see what
//! earlier ones left, so a subset can differ where the whole corpus would not).

mod compare;
mod normalize;
mod wire;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fleetform_controlplane::ControlPlane;
use serde_json::Value;

use normalize::Volatile;
use wire::{Answer, Caller, Wire};

/// Scenarios the embedded control plane does not yet answer as kube-apiserver does, with why.
/// A scenario that answers the same must leave this list (the test says so).
const KNOWN_DIFFERENT: &[(&str, &str)] = &[];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_scenario_is_answered_as_kube_apiserver_answers() {
    let plane = ControlPlane::builder()
        .start()
        .await
        .expect("control plane starts");
    let admin = plane
        .identities()
        .expect("a secure control plane")
        .kubeconfig_for("admin", &["system:masters"])
        .expect("an admin kubeconfig");
    let wire = Wire::from_kubeconfig(plane.addr(), &admin);

    let mut report = String::new();
    let mut unexpected = Vec::new();
    let mut now_same = Vec::new();
    let only: Vec<String> = std::env::var("GOLDEN_ONLY")
        .map(|v| v.split(',').map(str::to_string).collect())
        .unwrap_or_default();
    for file in corpus() {
        let file_name = file.file_name().unwrap_or_default().to_string_lossy();
        if !only.is_empty() && !only.iter().any(|p| file_name.starts_with(p.as_str())) {
            continue;
        }
        let text = std::fs::read(&file).expect("read scenario");
        let mut scenario: Value =
            serde_json::from_slice(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        keep_body_text(&mut scenario, &text);
        let name = scenario["scenario"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let outcome = replay(&wire, &scenario).await;
        let known = KNOWN_DIFFERENT.iter().find(|(n, _)| *n == name);
        report.push_str(&format!(
            "{name}: {}/{} steps the same{}\n",
            outcome.same,
            outcome.steps,
            if known.is_some() { " (known)" } else { "" }
        ));
        let print_all = std::env::var_os("GOLDEN_REPORT").is_some();
        if !outcome.differences.is_empty() && (known.is_none() || print_all) {
            for d in &outcome.differences {
                report.push_str(&format!("  {d}\n"));
            }
        }
        match (known, outcome.differences.is_empty()) {
            (None, false) => unexpected.push(name),
            (Some(_), true) => now_same.push(name),
            _ => {}
        }
    }
    println!("{report}");
    assert!(
        unexpected.is_empty(),
        "scenarios answered differently from kube-apiserver: {unexpected:?}\n{report}"
    );
    assert!(
        now_same.is_empty(),
        "scenarios now answered the same: take them off KNOWN_DIFFERENT: {now_same:?}"
    );
}

/// Each JSON request body's text as recorded, in `raw_body`: a body is sent as it was, keys
/// in its order (kube-apiserver reports unknown fields in document order), not re-serialised
/// from the parsed corpus.
fn keep_body_text(scenario: &mut Value, text: &[u8]) {
    #[derive(serde::Deserialize)]
    struct Raw {
        #[serde(default)]
        setup: Vec<RawStep>,
        #[serde(default)]
        steps: Vec<RawStep>,
    }
    #[derive(serde::Deserialize)]
    struct RawStep {
        request: Option<RawRequest>,
    }
    #[derive(serde::Deserialize)]
    struct RawRequest {
        body: Option<Box<serde_json::value::RawValue>>,
    }
    let raw: Raw = serde_json::from_slice(text).expect("the scenario parsed once already");
    for (part, raw_steps) in [("setup", raw.setup), ("steps", raw.steps)] {
        for (step, raw_step) in list_mut(&mut scenario[part]).iter_mut().zip(raw_steps) {
            let body = raw_step.request.and_then(|r| r.body);
            if let Some(body) = body.filter(|b| b.get().starts_with(['{', '[']))
                && let Some(request) = step.get_mut("request").and_then(Value::as_object_mut)
            {
                request.insert("raw_body".into(), Value::String(body.get().to_string()));
            }
        }
    }
}

fn list_mut(v: &mut Value) -> &mut [Value] {
    v.as_array_mut().map(Vec::as_mut_slice).unwrap_or_default()
}

fn corpus() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/k8s-golden");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no scenarios in {}", dir.display());
    files
}

struct Outcome {
    steps: usize,
    same: usize,
    differences: Vec<String>,
}

/// One scenario on the shared server: its setup, then each step, compared.
async fn replay(wire: &Wire, scenario: &Value) -> Outcome {
    let mut run = Run {
        wire,
        vars: BTreeMap::new(),
        volatile: Volatile::default(),
    };
    let name = scenario["scenario"].as_str().unwrap_or_default();
    let mut differences = Vec::new();
    for (i, step) in list(&scenario["setup"]).iter().enumerate() {
        if let Err(e) = run.setup(step).await {
            differences.push(format!("setup {i}: {e}"));
        }
    }
    let steps = list(&scenario["steps"]);
    let mut same = 0;
    for (i, step) in steps.iter().enumerate() {
        let found = run.step(step).await;
        if found.is_empty() {
            same += 1;
        }
        let request = &step["request"];
        let what = format!(
            "{name} step {i} ({} {}{})",
            request["method"].as_str().unwrap_or_default(),
            request["path"].as_str().unwrap_or_default(),
            step["note"]
                .as_str()
                .map(|n| format!(": {n}"))
                .unwrap_or_default()
        );
        differences.extend(found.into_iter().map(|d| format!("{what}: {d}")));
    }
    Outcome {
        steps: steps.len(),
        same,
        differences,
    }
}

fn list(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or_default()
}

struct Run<'a> {
    wire: &'a Wire,
    vars: BTreeMap<String, String>,
    volatile: Volatile,
}

impl Run<'_> {
    async fn setup(&mut self, step: &Value) -> Result<(), String> {
        let answer = if step.get("until").is_some() {
            self.wait(step).await?
        } else {
            self.send(&step["request"]).await?
        };
        let ok: Vec<u64> = list(&step["ok_status"])
            .iter()
            .filter_map(Value::as_u64)
            .collect();
        if !ok.is_empty() && !ok.contains(&u64::from(answer.status)) {
            return Err(format!(
                "answered {} (expected one of {ok:?}): {}",
                answer.status,
                String::from_utf8_lossy(&answer.body)
            ));
        }
        Ok(())
    }

    async fn step(&mut self, step: &Value) -> Vec<String> {
        let answer = if step.get("until").is_some() {
            self.wait(step).await
        } else {
            self.send(&step["request"]).await
        };
        let answer = match answer {
            Ok(a) => a,
            Err(e) => return vec![e],
        };
        self.capture(step, &answer);
        let generate_name = step["request"]["body"]["metadata"]["generateName"].as_str();
        if let Some(prefix) = generate_name
            && let Ok(body) = serde_json::from_slice::<Value>(&answer.body)
            && let Some(name) = body["metadata"]["name"].as_str()
        {
            self.volatile.learn_generated(prefix, name);
        }
        self.compare(step, &answer, generate_name)
    }

    /// Polls a wait step's request until its clauses hold, as the recording did, with three
    /// times the real server's time (at least 30 s) before calling it a difference.
    async fn wait(&mut self, step: &Value) -> Result<Answer, String> {
        let observed = step["observed_after_s"].as_f64().unwrap_or(0.0);
        let patience = Duration::from_secs_f64((observed * 3.0).max(30.0));
        let started = Instant::now();
        loop {
            let answer = self.send(&step["request"]).await?;
            let unmet: Vec<&Value> = list(&step["until"])
                .iter()
                .filter(|clause| !holds(clause, &answer))
                .collect();
            if unmet.is_empty() {
                return Ok(answer);
            }
            if started.elapsed() > patience {
                return Err(format!(
                    "waited {patience:?} for \"{}\"; still unmet: {}; last answer {}: {}",
                    step["wait_until"].as_str().unwrap_or_default(),
                    compare::short(&Value::Array(unmet.into_iter().cloned().collect())),
                    answer.status,
                    String::from_utf8_lossy(&answer.body)
                        .chars()
                        .take(400)
                        .collect::<String>()
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn send(&self, request: &Value) -> Result<Answer, String> {
        let method = request["method"].as_str().unwrap_or("GET");
        let path = self.substitute(request["path"].as_str().unwrap_or("/"));
        let mut headers = Vec::new();
        let mut caller = Caller::Admin;
        if let Some(h) = request["headers"].as_object() {
            for (name, value) in h {
                if name.eq_ignore_ascii_case("authorization") {
                    caller = Caller::NoCertificate;
                }
                headers.push((
                    name.clone(),
                    self.substitute(value.as_str().unwrap_or_default()),
                ));
            }
        }
        if request["identity"].as_str() == Some("anonymous") {
            caller = Caller::NoCertificate;
        }
        let body = match (&request["raw_body"], &request["body"]) {
            (_, Value::Null) => None,
            (Value::String(raw), _) | (_, Value::String(raw)) => {
                Some(self.substitute(raw).into_bytes())
            }
            (_, json) => Some(self.substitute(&json.to_string()).into_bytes()),
        };
        self.wire.send(caller, method, &path, &headers, body).await
    }

    /// `${name}` as captured earlier, `${repeat:C:N}` as C N times.
    fn substitute(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let Some(len) = rest[start..].find('}') else {
                break;
            };
            let var = &rest[start + 2..start + len];
            match var.strip_prefix("repeat:").and_then(|r| r.split_once(':')) {
                Some((c, n)) => out.push_str(&c.repeat(n.parse().expect("repeat count"))),
                None => out.push_str(
                    self.vars
                        .get(var)
                        .unwrap_or_else(|| panic!("${{{var}}} was never captured")),
                ),
            }
            rest = &rest[start + len + 1..];
        }
        out.push_str(rest);
        out
    }

    fn capture(&mut self, step: &Value, answer: &Answer) {
        let Some(captures) = step["capture"].as_object() else {
            return;
        };
        let body: Value = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
        for (var, path) in captures {
            let value = lookup(&body, path.as_str().unwrap_or_default())
                .and_then(Value::as_str)
                .unwrap_or_default();
            self.vars.insert(var.clone(), value.to_string());
        }
    }

    fn compare(&self, step: &Value, answer: &Answer, generate_name: Option<&str>) -> Vec<String> {
        let expected = &step["response"];
        let mut out = Vec::new();
        let status = expected["status"].as_u64().unwrap_or_default();
        if u64::from(answer.status) != status {
            out.push(format!(
                "status {} (kube-apiserver: {status}): {}",
                answer.status,
                self.volatile
                    .text(&String::from_utf8_lossy(&answer.body), generate_name)
            ));
            return out;
        }
        let content_type = expected["headers"]["Content-Type"].as_str();
        if answer.content_type.as_deref() != content_type {
            out.push(format!(
                "Content-Type {:?} (kube-apiserver: {content_type:?})",
                answer.content_type
            ));
        }
        let mut warnings: Vec<String> = answer
            .warnings
            .iter()
            .map(|w| self.volatile.text(w, generate_name))
            .collect();
        let mut expected_warnings: Vec<String> = list(&expected["headers"]["Warning"])
            .iter()
            .filter_map(|w| w.as_str().map(str::to_string))
            .collect();
        warnings.sort();
        expected_warnings.sort();
        if warnings != expected_warnings {
            out.push(format!(
                "warnings {warnings:?} (kube-apiserver: {expected_warnings:?})"
            ));
        }
        let unordered: Vec<&str> = list(&step["unordered"])
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let text = String::from_utf8_lossy(&answer.body);
        if expected["stream"].as_bool() == Some(true) {
            self.compare_stream(&expected["body"], &text, generate_name, &mut out);
        } else if let Some(raw) = expected["body"]["raw"].as_str() {
            let ours = self.volatile.text(&text, generate_name);
            if ours != raw {
                out.push(format!("body {ours:?} (kube-apiserver: {raw:?})"));
            }
        } else {
            match serde_json::from_str::<Value>(&text) {
                Ok(mut body) => {
                    self.volatile.value(&mut body, generate_name);
                    let mut expected_body = expected["body"].clone();
                    normalize::same_operation_in_any_order(&mut expected_body);
                    normalize::same_operation_in_any_order(&mut body);
                    compare::values(&expected_body, &body, "body", &unordered, &mut out);
                }
                Err(e) => out.push(format!("body is not JSON ({e}): {text:?}")),
            }
        }
        let hint = &expected["body_bytes_hint"];
        if hint["checked"].as_bool() == Some(true) {
            self.compare_bytes(hint, &text, generate_name, &mut out);
        }
        out
    }

    fn compare_stream(
        &self,
        expected: &Value,
        text: &str,
        generate_name: Option<&str>,
        out: &mut Vec<String>,
    ) {
        let mut events = Vec::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            match serde_json::from_str::<Value>(line) {
                Ok(mut event) => {
                    self.volatile.value(&mut event, generate_name);
                    events.push(event);
                }
                Err(e) => out.push(format!("watch event is not JSON ({e}): {line:?}")),
            }
        }
        let types = |events: &[Value]| -> Vec<String> {
            events
                .iter()
                .map(|e| e["type"].as_str().unwrap_or("?").to_string())
                .collect()
        };
        let expected = list(expected);
        if types(expected) != types(&events) {
            out.push(format!(
                "watch events {:?} (kube-apiserver: {:?})",
                types(&events),
                types(expected)
            ));
            return;
        }
        for (i, (e, a)) in expected.iter().zip(&events).enumerate() {
            compare::values(e, a, &format!("event[{i}]"), &[], out);
        }
    }

    fn compare_bytes(
        &self,
        hint: &Value,
        text: &str,
        generate_name: Option<&str>,
        out: &mut Vec<String>,
    ) {
        if let Some(newline) = hint["trailing_newline"].as_bool()
            && text.ends_with('\n') != newline
        {
            out.push(format!(
                "trailing newline: {} (kube-apiserver: {newline})",
                !newline
            ));
        }
        if let Some((keys, metadata_keys)) = compare::key_order(text) {
            let expect = |k: &str| -> Vec<String> {
                list(&hint[k])
                    .iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            };
            if keys != expect("key_order") {
                out.push(format!(
                    "key order {keys:?} (kube-apiserver: {:?})",
                    expect("key_order")
                ));
            }
            if metadata_keys != expect("metadata_key_order") {
                out.push(format!(
                    "metadata key order {metadata_keys:?} (kube-apiserver: {:?})",
                    expect("metadata_key_order")
                ));
            }
        }
        if let Some(raw) = hint["raw"].as_str() {
            let ours = age_free(&self.volatile.text(text, generate_name));
            let theirs = age_free(raw);
            if ours != theirs {
                let at = ours
                    .chars()
                    .zip(theirs.chars())
                    .take_while(|(a, b)| a == b)
                    .count();
                let around = |s: &str| {
                    s.chars()
                        .skip(at.saturating_sub(40))
                        .take(120)
                        .collect::<String>()
                };
                out.push(format!(
                    "bytes differ at character {at}: …{:?}… (kube-apiserver: …{:?}…)",
                    around(&ours),
                    around(&theirs)
                ));
            }
        }
    }
}

/// A Table row's Age cell (its last) is how long ago, which no two runs agree on.
fn age_free(text: &str) -> String {
    static AGE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r#""(\d+[smhdy])+"\],"object""#).expect("age pattern")
    });
    AGE.replace_all(text, r#""<age>"],"object""#).into_owned()
}

/// Whether a wait step's clause holds for an answer.
fn holds(clause: &Value, answer: &Answer) -> bool {
    if let Some(status) = clause["status"].as_u64() {
        return u64::from(answer.status) == status;
    }
    let body: Value = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
    let found = lookup(&body, clause["path"].as_str().unwrap_or_default());
    if let Some(exists) = clause["exists"].as_bool() {
        return found.is_some() == exists;
    }
    if let Some(len) = clause["len"].as_u64() {
        return found.and_then(Value::as_array).map(Vec::len) == usize::try_from(len).ok();
    }
    found == Some(&clause["equals"])
}

/// A value by a path like `status.conditions[type=Ready].status`.
fn lookup<'v>(v: &'v Value, path: &str) -> Option<&'v Value> {
    let mut at = v;
    for segment in path.split('.').filter(|s| !s.is_empty()) {
        let (field, selector) = match segment.split_once('[') {
            Some((f, sel)) => (f, sel.strip_suffix(']')),
            None => (segment, None),
        };
        if !field.is_empty() {
            at = at.get(field)?;
        }
        if let Some(selector) = selector {
            let (key, want) = selector.split_once('=')?;
            at = at
                .as_array()?
                .iter()
                .find(|item| item.get(key).and_then(Value::as_str) == Some(want))?;
        }
    }
    Some(at)
}
