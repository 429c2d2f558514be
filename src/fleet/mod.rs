//! The fleet model: a fleet repo's documents, loaded and validated.
//!
//! Loading is pure: it takes the files a [`crate::source`] read (paths relative to the fleet root
//! and their bytes) and returns either the [`Fleet`] they declare or every problem found in them,
//! each with file, line, column and JSON pointer. It never touches the file system or the network.

pub mod diagnostic;
pub mod names;
pub mod reference;
pub mod schema;
mod validate;
pub mod yaml;

use std::collections::BTreeMap;
use std::fmt;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::api::fleet::{API_VERSION, AddOn, Hub, Spoke};
pub use diagnostic::Diagnostic;
use diagnostic::DocumentOrigin;
use yaml::Position;

/// Largest file the loader reads; anything bigger is refused unread.
pub const MAX_FILE_SIZE: u64 = 1024 * 1024;

/// The kinds of document a fleet repo holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Hub,
    Spoke,
    AddOn,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Hub, Kind::Spoke, Kind::AddOn];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Hub => "Hub",
            Kind::Spoke => "Spoke",
            Kind::AddOn => "AddOn",
        }
    }

    fn parse(kind: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == kind)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A file of the fleet repo, as a source read it.
#[derive(Clone, Debug)]
pub struct FleetFile {
    /// Path relative to the fleet root, `/`-separated.
    pub path: String,
    pub content: Vec<u8>,
}

/// Whether a path names a file the loader reads (`.yaml` or `.yml`).
pub fn is_fleet_file(path: &str) -> bool {
    path.ends_with(".yaml") || path.ends_with(".yml")
}

/// A document of the repo: its file (relative to the fleet root) and index in that file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DocumentRef {
    pub file: String,
    pub document: usize,
}

impl fmt::Display for DocumentRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (document {})", self.file, self.document + 1)
    }
}

/// A valid fleet: every hub, spoke and addon of the repo, by name.
#[derive(Clone, Debug, Default)]
pub struct Fleet {
    pub hubs: BTreeMap<String, Hub>,
    /// Boxed: a Spoke is most of a kilobyte in place, and a fleet of 10,000 was copied whole
    /// from one vector to the next while it was loaded (with the fleet in force still held).
    pub spokes: BTreeMap<String, Box<Spoke>>,
    pub addons: BTreeMap<String, AddOn>,
    /// Where each document is defined, by kind and name.
    pub locations: BTreeMap<(Kind, String), DocumentRef>,
}

impl Fleet {
    /// Whether the repo declares nothing at all.
    pub fn is_empty(&self) -> bool {
        self.hubs.is_empty() && self.spokes.is_empty() && self.addons.is_empty()
    }

    /// "1 hub, 4 spokes, 3 addons".
    pub fn summary(&self) -> String {
        let count =
            |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        format!(
            "{}, {}, {}",
            count(self.hubs.len(), "hub", "hubs"),
            count(self.spokes.len(), "spoke", "spokes"),
            count(self.addons.len(), "addon", "addons")
        )
    }
}

/// A document that passed its schema, with where it came from; boxed, so that sorting and
/// sifting thousands of them moves pointers.
pub(crate) struct Located<T> {
    pub name: String,
    pub value: Box<T>,
    pub origin: DocumentOrigin,
}

/// Documents of one repo, sorted by kind, before semantic validation.
#[derive(Default)]
pub(crate) struct Documents {
    pub hubs: Vec<Located<Hub>>,
    pub spokes: Vec<Located<Spoke>>,
    pub addons: Vec<Located<AddOn>>,
    /// Names of documents that failed their schema but still have a name: references to them
    /// must not be reported as dangling on top of the schema error.
    pub broken_names: Vec<(Kind, String)>,
    /// Documents that failed their schema but are checked across documents all the same, with
    /// what was left out of them (see [`salvage`]).
    pub salvaged: Vec<Salvaged>,
}

/// A document checked across documents without the nodes that failed its schema.
pub(crate) struct Salvaged {
    file: String,
    index: usize,
    /// JSON pointers of the nodes left out or missing.
    left_out: Vec<String>,
}

impl Salvaged {
    /// Whether a cross-document finding is about what was left out of this document, and so
    /// would only repeat its schema error in other words (a kubeconfig that "sets none" because
    /// its one source had the wrong type).
    fn repeats_schema_error(&self, diagnostic: &Diagnostic) -> bool {
        let overlaps = |a: &str, b: &str| {
            a.strip_prefix(b)
                .or_else(|| b.strip_prefix(a))
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        };
        diagnostic.file == self.file
            && diagnostic.document == Some(self.index)
            && self
                .left_out
                .iter()
                .any(|pointer| overlaps(&diagnostic.pointer, pointer))
    }
}

/// Loads a fleet from its files: schema validation, then semantic validation. Returns every
/// problem of the repo, sorted by file and position, when there is any.
pub fn load(files: &[FleetFile]) -> Result<Fleet, Vec<Diagnostic>> {
    let (fleet, diagnostics) = load_partial(files);
    if diagnostics.is_empty() {
        Ok(fleet)
    } else {
        Err(diagnostics)
    }
}

/// [`load`], keeping what is valid of an invalid repo: the fleet of the documents that passed
/// their schema, and every problem, sorted (none: the fleet is valid). For reading the live
/// fleet of a repo whose newest commit is broken, never for applying it.
pub fn load_partial(files: &[FleetFile]) -> (Fleet, Vec<Diagnostic>) {
    let mut documents = Documents::default();
    let mut diagnostics = Vec::new();
    for file in files.iter().filter(|file| is_fleet_file(&file.path)) {
        read_file(file, &mut documents, &mut diagnostics);
    }
    // Schema and cross-document problems are reported in one pass, so that fixing the first
    // kind does not reveal the second only on the next run.
    let salvaged = std::mem::take(&mut documents.salvaged);
    let mut across = Vec::new();
    let fleet = validate::check(documents, &mut across);
    across.retain(|found| !salvaged.iter().any(|doc| doc.repeats_schema_error(found)));
    diagnostics.extend(across);
    diagnostics.sort();
    diagnostics.dedup();
    (fleet, diagnostics)
}

fn read_file(file: &FleetFile, documents: &mut Documents, diagnostics: &mut Vec<Diagnostic>) {
    if file.content.len() as u64 > MAX_FILE_SIZE {
        diagnostics.push(Diagnostic::file(
            &file.path,
            Position::START,
            format!(
                "file is {} bytes, larger than the 1 MiB limit",
                file.content.len()
            ),
        ));
        return;
    }
    let text = match std::str::from_utf8(&file.content) {
        Ok(text) => text,
        Err(err) => {
            let valid = &file.content[..err.valid_up_to()];
            let line = valid.iter().filter(|&&b| b == b'\n').count() + 1;
            let column = valid.iter().rev().take_while(|&&b| b != b'\n').count() + 1;
            diagnostics.push(Diagnostic::file(
                &file.path,
                Position { line, column },
                format!(
                    "file is not valid UTF-8 (invalid byte at offset {})",
                    err.valid_up_to()
                ),
            ));
            return;
        }
    };
    let parsed = match yaml::parse_documents_unindexed(text) {
        Ok(parsed) => parsed,
        Err(err) => {
            diagnostics.push(Diagnostic::file(
                &file.path,
                err.position,
                format!("invalid YAML: {}", err.message),
            ));
            return;
        }
    };
    let source = diagnostic::FileSpans::new(text);
    for (index, document) in parsed.into_iter().enumerate() {
        if document.value.is_null() {
            continue;
        }
        let origin = DocumentOrigin {
            file: file.path.clone(),
            index,
            source: source.clone(),
        };
        read_document(document.value, origin, documents, diagnostics);
    }
}

fn read_document(
    value: Value,
    origin: DocumentOrigin,
    documents: &mut Documents,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let Some(object) = value.as_object() else {
        diagnostics.push(origin.at(
            "",
            "a fleet document must be a mapping with apiVersion, kind, metadata and spec",
        ));
        return;
    };
    match object.get("apiVersion") {
        Some(Value::String(api_version)) if api_version == API_VERSION => {}
        Some(other) => {
            diagnostics.push(origin.at(
                "/apiVersion",
                format!(
                    "apiVersion {other} is not a fleet repo document (expected {API_VERSION:?}); \
                     keep other YAML out of the fleet root or point --path at the fleet directory"
                ),
            ));
            return;
        }
        None => {
            diagnostics
                .push(origin.at("", format!("missing apiVersion (expected {API_VERSION:?})")));
            return;
        }
    }
    let kind = match object.get("kind") {
        Some(Value::String(kind)) => match Kind::parse(kind) {
            Some(kind) => kind,
            None => {
                let hint = names::did_you_mean(kind, Kind::ALL.map(Kind::as_str));
                diagnostics.push(origin.at(
                    "/kind",
                    format!(
                        "unknown kind {kind:?}{hint} (a fleet repo holds Hub, Spoke and AddOn)"
                    ),
                ));
                return;
            }
        },
        Some(other) => {
            diagnostics.push(origin.at("/kind", format!("kind must be a string, got {other}")));
            return;
        }
        None => {
            diagnostics.push(origin.at("", "missing kind (Hub, Spoke or AddOn)"));
            return;
        }
    };
    let problems = schema::validate(kind, &value, &origin);
    if problems.is_empty() {
        // The schema admits only what the types can hold; a failure here means they disagree.
        if let Err(err) = typed(kind, value, origin.clone(), documents) {
            diagnostics.push(origin.at("", format!("cannot read document: {err}")));
        }
        return;
    }
    let name = value
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .map(str::to_string);
    let failed: Vec<String> = problems.iter().map(|p| p.pointer.clone()).collect();
    diagnostics.extend(problems);
    let kept = salvage(value, &failed).and_then(|(value, left_out)| {
        let salvaged = Salvaged {
            file: origin.file.clone(),
            index: origin.index,
            left_out,
        };
        typed(kind, value, origin, documents)
            .ok()
            .map(|()| salvaged)
    });
    match (kept, name) {
        (Some(salvaged), _) => documents.salvaged.push(salvaged),
        (None, Some(name)) => documents.broken_names.push((kind, name)),
        (None, None) => {}
    }
}

/// A document without the nodes that failed its schema, and the pointers of what it lacks now:
/// a failing list goes as a whole (so the indexes of its other items still mean what they said).
/// `None` when what is left has no name or is not a document: a failure at the root, or one of
/// the name.
fn salvage(mut value: Value, failed: &[String]) -> Option<(Value, Vec<String>)> {
    let mut left_out = Vec::new();
    for pointer in failed {
        if pointer.is_empty() || pointer == "/metadata/name" {
            return None;
        }
        let cut = outermost_list(&value, pointer);
        if let Some((parent, key)) = cut.rsplit_once('/') {
            let key = key.replace("~1", "/").replace("~0", "~");
            if let Some(Value::Object(parent)) = value.pointer_mut(parent) {
                parent.remove(&key);
            }
        }
        left_out.push(pointer.clone());
        left_out.push(cut);
    }
    value.pointer("/metadata/name")?.as_str()?;
    Some((value, left_out))
}

/// The pointer of the outermost list `pointer` goes through, or `pointer` itself.
fn outermost_list(value: &Value, pointer: &str) -> String {
    let mut node = value;
    let mut walked = String::new();
    for token in pointer.split('/').skip(1) {
        if node.is_array() {
            return walked;
        }
        let key = token.replace("~1", "/").replace("~0", "~");
        match node.get(&key) {
            Some(next) => node = next,
            None => break,
        }
        walked.push('/');
        walked.push_str(token);
    }
    pointer.to_string()
}

/// Reads a document that passed its schema (or what is left of it) into its kind's type.
fn typed(
    kind: Kind,
    value: Value,
    origin: DocumentOrigin,
    documents: &mut Documents,
) -> Result<(), serde_json::Error> {
    fn push<T: DeserializeOwned>(
        value: Value,
        origin: DocumentOrigin,
        into: &mut Vec<Located<T>>,
    ) -> Result<(), serde_json::Error> {
        let name = value
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        into.push(Located {
            name,
            value: Box::new(serde_json::from_value(value)?),
            origin,
        });
        Ok(())
    }
    match kind {
        Kind::Hub => push(value, origin, &mut documents.hubs),
        Kind::Spoke => push(value, origin, &mut documents.spokes),
        Kind::AddOn => push(value, origin, &mut documents.addons),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use serde_json::json;

    fn file(path: &str, text: &str) -> FleetFile {
        FleetFile {
            path: path.to_string(),
            content: text.as_bytes().to_vec(),
        }
    }

    /// Every field the schemas know (`the_kitchen_sink_sets_every_field_the_schemas_know`), so a
    /// field the Rust types drop or rename fails `every_schema_field_survives_into_the_typed_fleet`.
    const KITCHEN_SINK: &str = r#"
apiVersion: fleetform.io/v1alpha1
kind: Hub
metadata: {name: main, labels: {tier: core}, annotations: {owner: platform}}
spec:
  kubeconfig: {secretRef: {namespace: fleetform-system, name: hub, key: kubeconfig}}
  apiServer: https://hub.example.com:6443
  caBundleSecretRef: {namespace: fleetform-system, name: hub-ca, key: ca.crt}
  agent: {version: 1.2.3, image: fleetform:1.2.3}
  registration: {leaseDurationSeconds: 30, clusterClaimsMax: 10, clientCertExpirationSeconds: 3600}
  rollout:
    strategy: Groups
    maxConcurrency: 10%
    maxFailures: 1
    minSuccessSeconds: 60
    progressDeadlineSeconds: 900
    offline: Wait
    paused: false
    groups:
      - {name: canary, spokes: [edge], maxConcurrency: 1}
      - {name: prod, selector: {matchLabels: {env: prod}}}
---
apiVersion: fleetform.io/v1alpha1
kind: Hub
metadata: {name: local}
spec:
  kubeconfig: {inCluster: true}
  caBundle: "-----BEGIN CERTIFICATE-----\nMAA=\n-----END CERTIFICATE-----\n"
  registration:
    autoApproval: {users: ["system:serviceaccount:open-cluster-management:cluster-bootstrap"]}
---
apiVersion: fleetform.io/v1alpha1
kind: Spoke
metadata: {name: edge, labels: {env: prod}, annotations: {owner: edge-team}}
spec:
  hubRef: main
  kubeconfig: {context: edge}
  leaseDurationSeconds: 20
  clusterClaimsMax: 3
  agent: {version: 1.2.4}
  addons: [metrics, {name: logging, installNamespace: logs}]
  availability: {mode: poll, pollIntervalSeconds: 15, backoff: 2, backoffDelaySeconds: 3, backoffLimit: 5}
  cleanup: {forceClusterDrain: true, purgeAgentNamespace: false, unjoinTimeoutSeconds: 900}
  taints: [{key: example.com/maintenance, value: "true", effect: PreferNoSelect}]
  clusterSet: edge-sites
---
apiVersion: fleetform.io/v1alpha1
kind: Spoke
metadata: {name: lab}
spec:
  hubRef: local
  kubeconfig: {embedded: {}}
---
apiVersion: fleetform.io/v1alpha1
kind: AddOn
metadata: {name: metrics, labels: {team: observability}, annotations: {owner: sre}}
spec:
  installNamespace: metrics
  healthCheck: {mode: Customized}
  registrations:
    - signerName: example.com/metrics
      subject: {user: metrics, groups: [metrics], organizationUnits: [ops]}
      signerSecretRef: {namespace: fleetform-system, name: metrics-ca}
  rollout:
    strategy: Groups
    maxConcurrency: 2
    maxFailures: 10%
    minSuccessSeconds: 30
    progressDeadlineSeconds: 300
    offline: Skip
    paused: true
    groups:
      - {name: first, spokes: [edge], selector: {matchLabels: {env: prod}}, maxConcurrency: 1}
---
apiVersion: fleetform.io/v1alpha1
kind: AddOn
metadata: {name: logging}
"#;

    /// `part` with everything it holds found, equal, in `whole`.
    fn assert_within(part: &Value, whole: &Value, at: &str) {
        match (part, whole) {
            (Value::Object(part), Value::Object(whole)) => {
                for (key, value) in part {
                    let found = whole.get(key).unwrap_or(&Value::Null);
                    assert_within(value, found, &format!("{at}/{key}"));
                }
            }
            _ => assert_eq!(part, whole, "{at}"),
        }
    }

    #[test]
    fn every_schema_field_survives_into_the_typed_fleet() {
        let fleet = load(&[file("fleet.yaml", KITCHEN_SINK)]).expect("valid fleet");
        for document in yaml::parse_documents(KITCHEN_SINK).unwrap() {
            let name = document.value["metadata"]["name"].as_str().unwrap();
            let typed = match document.value["kind"].as_str().unwrap() {
                "Hub" => serde_json::to_value(&fleet.hubs[name]).unwrap(),
                "Spoke" => serde_json::to_value(&fleet.spokes[name]).unwrap(),
                _ => serde_json::to_value(&fleet.addons[name]).unwrap(),
            };
            for part in ["metadata", "spec"] {
                if let Some(written) = document.value.get(part) {
                    assert_within(written, &typed[part], &format!("{name}/{part}"));
                }
            }
        }
    }

    /// A schema node with its `$ref` followed, and its name: a definition's own, else `at`.
    fn follow<'s>(root: &'s Value, node: &'s Value, at: String) -> (String, &'s Value) {
        match node.get("$ref").and_then(Value::as_str) {
            Some(target) => (
                target.rsplit('/').next().unwrap().to_string(),
                root.pointer(target.strip_prefix('#').unwrap()).unwrap(),
            ),
            None => (at, node),
        }
    }

    /// Every field a schema node knows, as (where, field): a definition by its name, any other
    /// node by its pointer below its kind.
    fn schema_fields(root: &Value, node: &Value, at: String, out: &mut BTreeSet<(String, String)>) {
        let (at, node) = follow(root, node, at);
        if let Some(properties) = node.get("properties").and_then(Value::as_object) {
            for (field, child) in properties {
                if out.insert((at.clone(), field.clone())) {
                    schema_fields(root, child, format!("{at}/{field}"), out);
                }
            }
        }
        if let Some(items) = node.get("items") {
            schema_fields(root, items, format!("{at}/*"), out);
        }
    }

    /// The fields `value` sets, named as [`schema_fields`] names them.
    fn set_fields(
        root: &Value,
        node: &Value,
        at: String,
        value: &Value,
        out: &mut BTreeSet<(String, String)>,
    ) {
        let (at, node) = follow(root, node, at);
        match value {
            Value::Object(fields) => {
                for (field, child) in fields {
                    if let Some(schema) = node.get("properties").and_then(|p| p.get(field)) {
                        out.insert((at.clone(), field.clone()));
                        set_fields(root, schema, format!("{at}/{field}"), child, out);
                    }
                }
            }
            Value::Array(items) => {
                for item in items {
                    set_fields(root, &node["items"], format!("{at}/*"), item, out);
                }
            }
            _ => {}
        }
    }

    #[test]
    fn the_kitchen_sink_sets_every_field_the_schemas_know() {
        let (mut known, mut set) = (BTreeSet::new(), BTreeSet::new());
        for kind in Kind::ALL {
            let root = schema::schema(kind);
            schema_fields(root, root, kind.to_string(), &mut known);
        }
        for document in yaml::parse_documents(KITCHEN_SINK).unwrap() {
            let kind = Kind::parse(document.value["kind"].as_str().unwrap()).unwrap();
            let root = schema::schema(kind);
            set_fields(root, root, kind.to_string(), &document.value, &mut set);
        }
        let missing: Vec<_> = known.difference(&set).collect();
        assert!(missing.is_empty(), "KITCHEN_SINK does not set {missing:?}");
    }

    #[test]
    fn omitted_fields_take_the_documented_defaults() {
        let fleet = load(&[file("fleet.yaml", KITCHEN_SINK)]).expect("valid fleet");
        let logging = serde_json::to_value(&fleet.addons["logging"].spec).unwrap();
        assert_eq!(
            logging,
            json!({"installNamespace": "open-cluster-management-agent-addon", "healthCheck": {"mode": "Lease"}})
        );
        let minimal = "apiVersion: fleetform.io/v1alpha1\nkind: Hub\nmetadata: {name: h}\nspec: {kubeconfig: {embedded: {}}}\n";
        let fleet = load(&[file("hub.yaml", minimal)]).expect("valid hub");
        let registration = &fleet.hubs["h"].spec.registration;
        assert_eq!(
            (
                registration.lease_duration_seconds,
                registration.cluster_claims_max,
                registration.client_cert_expiration_seconds
            ),
            (60, 20, 86_400)
        );
        let spoke = "apiVersion: fleetform.io/v1alpha1\nkind: Spoke\nmetadata: {name: s}\nspec: {hubRef: h, kubeconfig: {embedded: {}}}\n";
        let fleet =
            load(&[file("hub.yaml", minimal), file("spoke.yaml", spoke)]).expect("valid fleet");
        let spec = &fleet.spokes["s"].spec;
        assert_eq!(
            spec.availability,
            crate::api::fleet::AvailabilitySpec::default()
        );
        assert_eq!(
            serde_json::to_value(&spec.availability).unwrap(),
            json!({"mode": "lease", "pollIntervalSeconds": 30, "backoff": 1, "backoffDelaySeconds": 5, "backoffLimit": -1})
        );
        assert!(spec.cleanup.purge_agent_namespace && !spec.cleanup.force_cluster_drain);
    }

    #[test]
    fn files_that_are_not_yaml_are_ignored_and_locations_are_recorded() {
        let fleet = load(&[
            file("README.md", "not: [yaml"),
            file("fleet.yml", KITCHEN_SINK),
        ])
        .expect("valid fleet");
        assert_eq!(fleet.summary(), "2 hubs, 2 spokes, 2 addons");
        let edge = &fleet.locations[&(Kind::Spoke, "edge".to_string())];
        assert_eq!(edge.to_string(), "fleet.yml (document 3)");
    }
}
